package mcs

import (
	"errors"
	"fmt"
)

// Rules a received service, or a whole received set, can break: the
// reasons refusals are counted under in metrics and reported in Events.
const (
	// RuleInvalid: a field the objects the service becomes would be
	// refused for by the API server, or that the model does not take.
	RuleInvalid = "invalid"
	// RuleDuplicate: a service listed twice, or out of key order, in a
	// stored set.
	RuleDuplicate = "duplicate"
	// RuleEndpoints, RuleEndpointGroups, RuleMetadataBytes: one service
	// past Limits.Endpoints, EndpointGroups or MetadataBytes.
	RuleEndpoints      = "endpoints"
	RuleEndpointGroups = "endpoint-groups"
	RuleMetadataBytes  = "metadata-bytes"
	// RuleServices, RuleTotalEndpoints, RuleTotalEndpointGroups,
	// RuleTotalMetadataBytes, RuleDocumentBytes: a service that would take
	// the peer's set past Limits.Services, TotalEndpoints,
	// TotalEndpointGroups, TotalMetadataBytes or DocumentBytes; also, for
	// RuleServices, a stored set refusing more services than
	// Limits.Services, and for RuleDocumentBytes, a stored set over
	// DocumentBytes once decompressed.
	RuleServices            = "services"
	RuleTotalEndpoints      = "total-endpoints"
	RuleTotalEndpointGroups = "total-endpoint-groups"
	RuleTotalMetadataBytes  = "total-metadata-bytes"
	RuleDocumentBytes       = "document-bytes"
	// RuleEncodedBytes: a stored set over Limits.EncodedBytes, or a
	// service that would take it there.
	RuleEncodedBytes = "encoded-bytes"
	// RuleUndecodable: a stored set that is not one.
	RuleUndecodable = "undecodable"
)

// Rules lists every rule, for metrics to report each from the start.
func Rules() []string {
	return []string{RuleInvalid, RuleDuplicate, RuleEndpoints, RuleEndpointGroups, RuleMetadataBytes,
		RuleServices, RuleTotalEndpoints, RuleTotalEndpointGroups, RuleTotalMetadataBytes, RuleDocumentBytes,
		RuleEncodedBytes, RuleUndecodable}
}

// RuleError is a refusal and the rule it applies.
type RuleError struct {
	// Rule is one of the Rule... constants.
	Rule string
	msg  string
	err  error
}

func (e *RuleError) Error() string { return e.msg }

// Unwrap returns the error the refusal wraps, such as ErrTooLarge.
func (e *RuleError) Unwrap() error { return e.err }

func invalid(format string, args ...any) error {
	return &RuleError{Rule: RuleInvalid, msg: fmt.Sprintf(format, args...)}
}

// RuleOf returns the rule err applies: that of the *RuleError it wraps,
// else RuleInvalid.
func RuleOf(err error) string {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	return RuleInvalid
}

// Cost is what a service, or a set, counts against the totals of Limits.
type Cost struct {
	Services, Endpoints, EndpointGroups, MetadataBytes int
	// Bytes is what the service takes of a stored set: its JSON and the
	// comma before it.
	Bytes int
}

// CostOf is what s counts, taking size bytes of a stored set.
func CostOf(s *Service, size int) Cost {
	c := Cost{Services: 1, EndpointGroups: len(s.Endpoints), MetadataBytes: s.metadataBytes(), Bytes: size}
	for _, g := range s.Endpoints {
		c.Endpoints += len(g.Endpoints)
	}
	return c
}

func (c Cost) plus(o Cost) Cost {
	return Cost{c.Services + o.Services, c.Endpoints + o.Endpoints, c.EndpointGroups + o.EndpointGroups,
		c.MetadataBytes + o.MetadataBytes, c.Bytes + o.Bytes}
}

func (c Cost) minus(o Cost) Cost {
	return Cost{c.Services - o.Services, c.Endpoints - o.Endpoints, c.EndpointGroups - o.EndpointGroups,
		c.MetadataBytes - o.MetadataBytes, c.Bytes - o.Bytes}
}

// totalRule tells whether rule is one of a total of the peer's set, whose
// verdict on a service depends on the services before it.
func totalRule(rule string) bool {
	switch rule {
	case RuleServices, RuleTotalEndpoints, RuleTotalEndpointGroups, RuleTotalMetadataBytes, RuleDocumentBytes:
		return true
	}
	return false
}

// within tells whether a set costing c is within the totals of l.
func (l Limits) within(c Cost) bool {
	return c.Services <= l.Services && c.EndpointGroups <= l.TotalEndpointGroups && c.Endpoints <= l.TotalEndpoints &&
		c.MetadataBytes <= l.TotalMetadataBytes && c.Bytes+len(docHead)+len(docTail) <= l.DocumentBytes
}

// Tally keeps a peer's accepted services within the totals of its
// Limits, in the order they come: a service that would take a total past
// its limit is refused, and those already in stay.
type Tally struct {
	limits Limits
	sum    Cost
	costs  map[Key]Cost
}

// NewTally returns an empty tally of l's totals.
func NewTally(l Limits) *Tally {
	return &Tally{limits: l.WithDefaults(), costs: map[Key]Cost{}}
}

// Add counts service k at cost c, replacing what k counted before; when
// that would take a total past its limit, k counts nothing and the error
// (a *RuleError) names the limit.
func (t *Tally) Add(k Key, c Cost) error {
	t.Remove(k)
	next := t.sum.plus(c)
	l := t.limits
	for _, b := range []struct {
		rule       string
		what       string
		have, most int
	}{
		{RuleServices, "services", next.Services, l.Services},
		{RuleTotalEndpointGroups, "endpoint groups (EndpointSlices)", next.EndpointGroups, l.TotalEndpointGroups},
		{RuleTotalEndpoints, "endpoints", next.Endpoints, l.TotalEndpoints},
		{RuleTotalMetadataBytes, "bytes of labels and annotations", next.MetadataBytes, l.TotalMetadataBytes},
		{RuleDocumentBytes, "bytes of JSON", next.Bytes + len(docHead) + len(docTail), l.DocumentBytes},
	} {
		if b.have > b.most {
			return &RuleError{Rule: b.rule, msg: fmt.Sprintf("the peer's services would hold %d %s, at most %d", b.have, b.what, b.most)}
		}
	}
	t.sum = next
	t.costs[k] = c
	return nil
}

// Remove stops counting service k.
func (t *Tally) Remove(k Key) {
	if c, ok := t.costs[k]; ok {
		t.sum = t.sum.minus(c)
		delete(t.costs, k)
	}
}

// Sum is what the services counted take together.
func (t *Tally) Sum() Cost { return t.sum }
