package mcs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// A stored set is a gzip-compressed JSON document,
// {"version":1,"services":[...]}, its services in key order, once each.

// Version is the version of the document and of the exchange protocol.
const Version = 1

// docHead and docTail are what a stored set holds around its services
// (docHead spells Version).
const (
	docHead = `{"version":1,"services":[`
	docTail = "]}\n"
)

// Rejected is a service of a received set that was not accepted, and why.
type Rejected struct {
	Key Key `json:"key"`
	// Rule is the rule it broke, one of the Rule... constants.
	Rule string `json:"rule"`
	// Reason says how, naming the field.
	Reason string `json:"reason"`
}

// RejectedSummary is what a gateway tells of the services it rejected,
// bounded whatever their number: how many by rule, and the first few.
type RejectedSummary struct {
	Rules map[string]int `json:"rules"`
	First []Rejected     `json:"first,omitempty"`
}

// Bounds of a RejectedSummary.
const (
	summaryServices    = 10
	summaryReasonBytes = 200
)

// Summarize sums rejected up: every service counted by rule, the first
// ten listed (their reasons cut to 200 bytes).
func Summarize(rejected []Rejected) RejectedSummary {
	sum := RejectedSummary{Rules: map[string]int{}}
	for _, r := range rejected {
		sum.Rules[r.Rule]++
		if len(sum.First) < summaryServices {
			if len(r.Reason) > summaryReasonBytes {
				r.Reason = r.Reason[:summaryReasonBytes] + "..."
			}
			sum.First = append(sum.First, r)
		}
	}
	return sum
}

// ErrTooLarge says a document or a set exceeds its bound.
var ErrTooLarge = errors.New("too large")

// documentError is a refusal of a whole stored set.
func documentError(rule string, wrapped error, format string, args ...any) error {
	msg := "export set: " + fmt.Sprintf(format, args...)
	if wrapped != nil {
		msg += ": " + wrapped.Error()
	}
	return &RuleError{Rule: rule, msg: msg, err: wrapped}
}

// Encode compresses the set into its stored form.
func Encode(s Set) ([]byte, error) {
	services, err := marshal(s.Sorted())
	if err != nil {
		return nil, err
	}
	data, _, err := encode(services, math.MaxInt, math.MaxInt)
	return data, err
}

// marshal returns the JSON of each service.
func marshal(services []Service) ([][]byte, error) {
	out := make([][]byte, len(services))
	for i := range services {
		b, err := json.Marshal(&services[i])
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// EncodeWithin is Encode kept within l.DocumentBytes and l.EncodedBytes:
// when the whole set does not fit, it keeps the longest run of services,
// in key order, that does, and returns the others as rejected.
func EncodeWithin(s Set, l Limits) ([]byte, []Rejected, error) {
	services := s.Sorted()
	// Each service is marshalled once; the search below compresses
	// prefixes of them again.
	docs, err := marshal(services)
	if err != nil {
		return nil, nil, err
	}
	return encodeWithin(services, docs, l)
}

// encodeWithin is EncodeWithin of services, in key order, marshalled as
// docs.
func encodeWithin(services []Service, docs [][]byte, l Limits) ([]byte, []Rejected, error) {
	l = l.WithDefaults()
	data, rule, err := encode(docs, l.DocumentBytes, l.EncodedBytes)
	if err != nil || rule == "" {
		return data, nil, err
	}
	// services[:fit] fits, services[:over] does not: compressed sizes
	// grow with the prefix, so a binary search finds the longest.
	fit, over := 0, len(services)
	if data, _, err = encode(nil, l.DocumentBytes, l.EncodedBytes); err != nil {
		return nil, nil, err
	}
	for over-fit > 1 {
		mid := (fit + over) / 2
		d, r, err := encode(docs[:mid], l.DocumentBytes, l.EncodedBytes)
		if err != nil {
			return nil, nil, err
		}
		if r == "" {
			fit, data = mid, d
		} else {
			over, rule = mid, r
		}
	}
	most := l.DocumentBytes
	if rule == RuleEncodedBytes {
		most = l.EncodedBytes
	}
	var rejected []Rejected
	for _, svc := range services[fit:] {
		rejected = append(rejected, Rejected{Key: svc.Key, Rule: rule,
			Reason: fmt.Sprintf("the peer's set would take more than %d bytes (%s) with it", most, rule)})
	}
	return data, rejected, nil
}

// errFull ends an encoding that went past a bound.
var errFull = errors.New("full")

// boundedBuffer is a buffer that refuses to grow past max bytes.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errFull
	}
	return b.Buffer.Write(p)
}

// encode writes services, marshalled, as a stored set, one at a time, and
// stops with the rule broken as soon as it takes more than docMax bytes of
// JSON or encMax bytes compressed.
func encode(services [][]byte, docMax, encMax int) ([]byte, string, error) {
	out := &boundedBuffer{max: encMax}
	zw := gzip.NewWriter(out)
	written := 0
	write := func(b []byte) (string, error) {
		if written += len(b); written > docMax {
			return RuleDocumentBytes, nil
		}
		if _, err := zw.Write(b); errors.Is(err, errFull) {
			return RuleEncodedBytes, nil
		} else if err != nil {
			return "", err
		}
		return "", nil
	}
	if rule, err := write([]byte(docHead)); rule != "" || err != nil {
		return nil, rule, err
	}
	for i, b := range services {
		if i > 0 {
			if rule, err := write([]byte{','}); rule != "" || err != nil {
				return nil, rule, err
			}
		}
		if rule, err := write(b); rule != "" || err != nil {
			return nil, rule, err
		}
	}
	if rule, err := write([]byte(docTail)); rule != "" || err != nil {
		return nil, rule, err
	}
	if err := zw.Close(); errors.Is(err, errFull) {
		return nil, RuleEncodedBytes, nil
	} else if err != nil {
		return nil, "", err
	}
	return out.Bytes(), "", nil
}

// countingReader reads at most max bytes from r, and says whether r had
// more.
type countingReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a document of exactly the bound from a
		// longer one.
		var one [1]byte
		if n, _ := io.ReadFull(c.r, one[:]); n > 0 {
			c.exceeded = true
			return 0, ErrTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// Decode reads a stored set within l, one service at a time, so that
// nothing but the accepted services and one more is ever held; now is
// this cluster's clock, for the export times. A service that fails
// Validate, comes out of key order or twice, or would take a total of l
// past its limit is rejected with the rule it broke, the services before
// it in key order kept, and the rest of the set stands. The whole set is
// refused (an error that is a *RuleError) when it is not a set, is over
// l.EncodedBytes stored or l.DocumentBytes decompressed, or has more
// services rejected than l.Services. Errors of bounds wrap ErrTooLarge.
func Decode(data []byte, l Limits, now time.Time) (Set, []Rejected, error) {
	return DecodeShards([]Shard{{Index: 0, Count: 1, Data: data}}, l, now)
}

// decoder is the state of one DecodeShards.
type decoder struct {
	limits   Limits
	now      time.Time
	set      Set
	rejected []Rejected
	tally    *Tally

	// The shard being read.
	place Shard
	in    *countingReader
	dec   *json.Decoder
	// last is the key of the last service read, for the key order.
	last    Key
	started bool
}

// shard reads one stored shard into the set.
func (d *decoder) shard(sh Shard) error {
	if len(sh.Data) > d.limits.EncodedBytes {
		return d.refuse(RuleEncodedBytes, ErrTooLarge, "%d bytes stored, at most %d", len(sh.Data), d.limits.EncodedBytes)
	}
	d.place, d.started = sh, false
	zr, err := gzip.NewReader(bytes.NewReader(sh.Data))
	if err != nil {
		return d.refuse(RuleUndecodable, err, "not gzip")
	}
	d.in = &countingReader{r: zr, left: int64(d.limits.DocumentBytes)}
	d.dec = json.NewDecoder(d.in)
	return d.document()
}

// refuse refuses the whole set for what the shard being read holds.
func (d *decoder) refuse(rule string, wrapped error, format string, args ...any) error {
	if d.place.Count > 1 {
		format = "shard " + ShardPlace(d.place.Index, d.place.Count) + ": " + format
	}
	return documentError(rule, wrapped, format, args...)
}

// fail makes err, an error of the stream, the refusal of the document.
func (d *decoder) fail(err error) error {
	if d.in.exceeded {
		return d.refuse(RuleDocumentBytes, ErrTooLarge, "more than %d bytes decompressed", d.limits.DocumentBytes)
	}
	return d.refuse(RuleUndecodable, err, "not a set")
}

func (d *decoder) delim(want json.Delim) error {
	tok, err := d.dec.Token()
	if err != nil {
		return d.fail(err)
	}
	if tok != want {
		return d.fail(fmt.Errorf("%v where %v belongs", tok, want))
	}
	return nil
}

func (d *decoder) document() error {
	if err := d.delim('{'); err != nil {
		return err
	}
	version := 0
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return d.fail(err)
		}
		switch tok {
		case "version":
			if err := d.dec.Decode(&version); err != nil {
				return d.fail(err)
			}
		case "services":
			if err := d.services(); err != nil {
				return err
			}
		default:
			var skip json.RawMessage
			if err := d.dec.Decode(&skip); err != nil {
				return d.fail(err)
			}
		}
	}
	if err := d.delim('}'); err != nil {
		return err
	}
	if version != Version {
		return d.refuse(RuleUndecodable, nil, "version %d, this side reads %d", version, Version)
	}
	return nil
}

func (d *decoder) services() error {
	if err := d.delim('['); err != nil {
		return err
	}
	for d.dec.More() {
		start := d.dec.InputOffset()
		var s Service
		err := d.dec.Decode(&s)
		size := int(d.dec.InputOffset() - start)
		if err != nil && size == 0 {
			// The stream itself is broken.
			return d.fail(err)
		}
		if err != nil {
			// A whole value, of the wrong shape.
			err = invalid("%v", err)
		}
		if err == nil {
			s.Normalize()
			err = s.Validate(d.limits, d.now)
		}
		if err == nil && d.started && s.Key.Compare(d.last) <= 0 {
			err = &RuleError{Rule: RuleDuplicate, msg: fmt.Sprintf("listed after %s: a set lists each service once, in key order", d.last)}
		}
		if i := shardOf(s.Key, d.place.Count); err == nil && i != d.place.Index {
			err = &RuleError{Rule: RuleDuplicate, msg: fmt.Sprintf("in shard %s: a set of %d shards lists it in shard %d only",
				ShardPlace(d.place.Index, d.place.Count), d.place.Count, i)}
		}
		if err == nil {
			d.last, d.started = s.Key, true
			err = d.tally.Add(s.Key, CostOf(&s, size))
		}
		if err != nil {
			d.rejected = append(d.rejected, Rejected{Key: s.Key, Rule: RuleOf(err), Reason: err.Error()})
			// Past that many, the set is only a flood.
			if len(d.rejected) > d.limits.Services {
				return d.refuse(RuleServices, ErrTooLarge, "more than %d services rejected", d.limits.Services)
			}
			continue
		}
		d.set[s.Key] = s
	}
	return d.delim(']')
}
