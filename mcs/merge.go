package mcs

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Source is the export set of one cluster of the clusterset, this one
// included.
type Source struct {
	Cluster  string
	Services Set
	// Live says whether the cluster is reachable now: its endpoints count
	// as ready only while it is.
	Live bool
	// Local marks this cluster's own set: its export times are its own
	// ServiceExports' creation times. A peer's set counts from when this
	// cluster first saw each service (Service.Seen).
	Local bool
}

// Member is one cluster's export of an imported service.
type Member struct {
	Cluster string
	Service Service
	Live    bool
	Local   bool
}

// Since is when this cluster knows m's export from, by its own clock:
// the ServiceExport's creation for a local export, the first sight of it
// for a peer's. A peer's export never seen (an older gateway wrote it) is
// younger than every other.
func (m Member) Since() time.Time {
	switch {
	case m.Local:
		return m.Service.Exported
	case m.Service.Seen.IsZero():
		return neverSeen
	default:
		return m.Service.Seen
	}
}

// neverSeen is later than any time this cluster sees an export at.
var neverSeen = time.Unix(1<<62, 0)

// Import is what this cluster makes of one service exported by one or more
// clusters: the properties of the oldest export, the union of the ports,
// and the conflicts, if any, as the ServiceExport condition reasons name
// them.
//
// Oldest is as this cluster observed it (Member.Since), never as a peer
// claims it: a peer's export wins only when this cluster saw it before
// its own export was made, and a peer cannot make its export older
// later. What the peer says in Service.Exported decides nothing.
type Import struct {
	Key
	// Winner is the oldest export: its properties are the import's.
	Winner Service
	// Ports are the union of the members' ports, the oldest export's
	// first; a port clashing by name or by protocol and number with one
	// already there is left out, and so is any port when one of them has
	// no name (a Service with several ports names them all).
	Ports []Port
	// Members are the exporting clusters, oldest export first (this
	// cluster's first among exports of the same time).
	Members []Member
	// Conflicts are the reasons the exports disagree
	// (mcsv1beta1.ServiceExportReason...), sorted; empty when they agree.
	Conflicts []string
}

// Merge groups the sources' services by key into imports.
func Merge(sources []Source) map[Key]*Import {
	byKey := map[Key][]Member{}
	for _, src := range sources {
		for k, s := range src.Services {
			byKey[k] = append(byKey[k], Member{Cluster: src.Cluster, Service: s, Live: src.Live, Local: src.Local})
		}
	}
	out := make(map[Key]*Import, len(byKey))
	for k, members := range byKey {
		slices.SortFunc(members, func(a, b Member) int {
			if c := a.Since().Compare(b.Since()); c != 0 {
				return c
			}
			if a.Local != b.Local {
				if a.Local {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Cluster, b.Cluster)
		})
		imp := &Import{Key: k, Winner: members[0].Service, Members: members}
		conflicts := map[string]bool{}
		for _, m := range members {
			imp.Ports = mergePorts(imp.Ports, m.Service.Ports)
			for reason, differs := range differences(imp.Winner, m.Service) {
				if differs {
					conflicts[reason] = true
				}
			}
		}
		imp.Conflicts = slices.Sorted(maps.Keys(conflicts))
		out[k] = imp
	}
	return out
}

// differences tells, by conflict reason, whether s disagrees with the
// winner w.
func differences(w, s Service) map[string]bool {
	samePorts := func(a, b []Port) bool {
		key := func(p Port) string { return p.Name + "/" + string(p.Protocol) + "/" + strconv.Itoa(int(p.Port)) }
		ka, kb := make([]string, len(a)), make([]string, len(b))
		for i, p := range a {
			ka[i] = key(p)
		}
		for i, p := range b {
			kb[i] = key(p)
		}
		slices.Sort(ka)
		slices.Sort(kb)
		return slices.Equal(ka, kb)
	}
	emptyAsNil := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	return map[string]bool{
		string(mcsv1beta1.ServiceExportReasonTypeConflict):                  w.Type != s.Type,
		string(mcsv1beta1.ServiceExportReasonPortConflict):                  !samePorts(w.Ports, s.Ports),
		string(mcsv1beta1.ServiceExportReasonSessionAffinityConflict):       w.SessionAffinity != s.SessionAffinity,
		string(mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict): !reflect.DeepEqual(w.SessionAffinityConfig, s.SessionAffinityConfig),
		string(mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict): !reflect.DeepEqual(w.InternalTrafficPolicy, s.InternalTrafficPolicy),
		string(mcsv1beta1.ServiceExportReasonTrafficDistributionConflict):   !reflect.DeepEqual(w.TrafficDistribution, s.TrafficDistribution),
		string(mcsv1beta1.ServiceExportReasonLabelsConflict):                !maps.Equal(emptyAsNil(w.Labels), emptyAsNil(s.Labels)),
		string(mcsv1beta1.ServiceExportReasonAnnotationsConflict):           !maps.Equal(emptyAsNil(w.Annotations), emptyAsNil(s.Annotations)),
		string(mcsv1beta1.ServiceExportReasonIPFamilyConflict):              !slices.Equal(w.IPFamilies, s.IPFamilies),
	}
}

// mergePorts adds to have the ports of more that clash with none of it: by
// name (an empty name counts), then by protocol and number. An unnamed
// port stays alone: the derived Service of several ports names them all.
func mergePorts(have, more []Port) []Port {
	for _, p := range more {
		clash := slices.ContainsFunc(have, func(h Port) bool {
			return h.Name == p.Name || h.Name == "" || p.Name == "" || (h.Protocol == p.Protocol && h.Port == p.Port)
		})
		if !clash {
			have = append(have, p)
		}
	}
	return have
}

// RoutedPorts returns the ports of group g of member m that the import
// routes to m's endpoints: those named after a port m exports exactly as
// the import carries it (name, protocol and number). A member whose port
// lost a conflict to an older export gets no traffic on it, nor on a port
// it does not export: the import's port is another cluster's.
func (imp *Import) RoutedPorts(m Member, g EndpointGroup) []Port {
	// Sets, not nested searches: every list here comes from peers, up to
	// a hundred ports each.
	type key struct {
		name     string
		protocol corev1.Protocol
		port     int32
	}
	carried := make(map[key]bool, len(imp.Ports))
	for _, p := range imp.Ports {
		carried[key{p.Name, p.Protocol, p.Port}] = true
	}
	type named struct {
		name     string
		protocol corev1.Protocol
	}
	served := map[named]bool{}
	for _, p := range m.Service.Ports {
		if carried[key{p.Name, p.Protocol, p.Port}] {
			served[named{p.Name, p.Protocol}] = true
		}
	}
	var out []Port
	for _, ep := range g.Ports {
		if served[named{ep.Name, ep.Protocol}] {
			out = append(out, ep)
		}
	}
	return out
}

// ConflictReason joins conflict reasons as the Conflict condition's reason
// carries several.
func ConflictReason(reasons []string) string { return strings.Join(reasons, ",") }

// Equal tells whether two imports are the same, field by field.
func (imp *Import) Equal(o *Import) bool {
	return imp.Key == o.Key && imp.Winner.Equal(&o.Winner) && slices.EqualFunc(imp.Ports, o.Ports, Port.equal) &&
		slices.EqualFunc(imp.Members, o.Members, func(a, b Member) bool {
			return a.Cluster == b.Cluster && a.Live == b.Live && a.Local == b.Local && a.Service.Equal(&b.Service)
		}) && slices.Equal(imp.Conflicts, o.Conflicts)
}
