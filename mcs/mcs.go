package mcs

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Key names one Service of the clusterset: namespace sameness makes
// namespace/name the same service in every cluster.
type Key struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Compare orders keys by namespace, then name.
func (k Key) Compare(o Key) int {
	return cmp.Or(strings.Compare(k.Namespace, o.Namespace), strings.Compare(k.Name, o.Name))
}

// Port is a port of an exported Service, or of its endpoints (then Port is
// the endpoints' target port).
type Port struct {
	Name        string          `json:"name,omitempty"`
	Protocol    corev1.Protocol `json:"protocol"`
	AppProtocol *string         `json:"appProtocol,omitempty"`
	Port        int32           `json:"port"`
}

// Endpoint is one address serving an exported Service.
type Endpoint struct {
	IP       netip.Addr `json:"ip"`
	Hostname string     `json:"hostname,omitempty"`
	Ready    bool       `json:"ready"`
}

// EndpointGroup are endpoints sharing one list of ports, as one
// EndpointSlice holds them.
type EndpointGroup struct {
	Ports     []Port     `json:"ports"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Service is one exported Service as its cluster publishes it.
type Service struct {
	Key
	// Exported is when the ServiceExport was created, as the exporting
	// cluster says. For this cluster's own exports it decides conflicts;
	// a peer's claim is checked and shown, never trusted: see Seen.
	Exported time.Time `json:"exported"`
	// Seen is when this cluster first received the export from the peer,
	// by this cluster's clock: the receiving gateway stamps it, and it
	// decides a peer's place among the exports of a service (see Merge).
	// Zero in a cluster's own exports; whatever a peer sends here is
	// dropped on receipt.
	Seen                  time.Time                            `json:"seen,omitzero"`
	Type                  mcsv1beta1.ServiceImportType         `json:"type"`
	Ports                 []Port                               `json:"ports"`
	SessionAffinity       corev1.ServiceAffinity               `json:"sessionAffinity,omitempty"`
	SessionAffinityConfig *corev1.SessionAffinityConfig        `json:"sessionAffinityConfig,omitempty"`
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	TrafficDistribution   *string                              `json:"trafficDistribution,omitempty"`
	IPFamilies            []corev1.IPFamily                    `json:"ipFamilies,omitempty"`
	Labels                map[string]string                    `json:"labels,omitempty"`
	Annotations           map[string]string                    `json:"annotations,omitempty"`
	Endpoints             []EndpointGroup                      `json:"endpoints,omitempty"`
}

// Normalize writes the API server's defaults into the fields left empty,
// so that two exports that differ only by spelling a default do not
// conflict: session affinity None, internal traffic policy Cluster, the
// IPv4 family.
func (s *Service) Normalize() {
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.InternalTrafficPolicy == nil {
		p := corev1.ServiceInternalTrafficPolicyCluster
		s.InternalTrafficPolicy = &p
	}
	if len(s.IPFamilies) == 0 {
		s.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
}

// Limits bound what one peer may publish, per service and in total, so
// that the worst set a peer may send costs this cluster a bounded amount
// of memory and of API objects: each of its services becomes at most one
// ServiceImport and one derived Service, and each endpoint group one
// EndpointSlice. What exceeds a limit is refused with the rule it broke
// (Rule...), and the rest of the set stands.
type Limits struct {
	// Services is the most services one peer may export.
	Services int
	// Endpoints is the most endpoints one service may have.
	Endpoints int
	// EndpointGroups is the most endpoint groups one service may have,
	// empty ones included.
	EndpointGroups int
	// MetadataBytes bounds the labels and annotations of one service,
	// keys and values.
	MetadataBytes int
	// TotalEndpoints is the most endpoints of all of a peer's services.
	TotalEndpoints int
	// TotalEndpointGroups is the most endpoint groups of all of a peer's
	// services, empty ones included: the EndpointSlices this cluster
	// makes for the peer, one per group.
	TotalEndpointGroups int
	// TotalMetadataBytes bounds the labels and annotations of all of a
	// peer's services.
	TotalMetadataBytes int
	// DocumentBytes bounds a stored set once decompressed, and the JSON of
	// the services a peer holds in this cluster.
	DocumentBytes int
	// EncodedBytes bounds a stored set as stored (compressed): a
	// ConfigMap holds at most 1 MiB.
	EncodedBytes int
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{
	Services:            2000,
	Endpoints:           1000,
	EndpointGroups:      100,
	MetadataBytes:       64 << 10,
	TotalEndpoints:      20_000,
	TotalEndpointGroups: 5000,
	TotalMetadataBytes:  256 << 10,
	DocumentBytes:       4 << 20,
	EncodedBytes:        1 << 20,
}

// WithDefaults returns l with the fields left zero (or negative) taken
// from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	defaults := d.limitFields()
	for i, f := range l.limitFields() {
		if *f.v <= 0 {
			*f.v = *defaults[i].v
		}
	}
	return l
}

// Fixed bounds of one service, whatever the limits: those of the objects
// it becomes.
const (
	maxPorts          = 100
	maxHostnameLength = 63
	// maxGroupEndpoints is the most endpoints an EndpointSlice holds.
	maxGroupEndpoints = 1000
	// maxAffinitySeconds is the longest ClientIP session affinity
	// timeout a Service takes.
	maxAffinitySeconds = 86400
)

// MaxClockSkew is how far in the future of this cluster's clock an
// export time may lie: a later one is refused.
const MaxClockSkew = 24 * time.Hour

// earliestExport is the earliest export time taken: nothing was exported
// before the Unix epoch, and the zero time is no time at all.
var earliestExport = time.Unix(0, 0)

// trafficDistributions are the values of a Service's
// spec.trafficDistribution the pinned k8s.io/api defines.
var trafficDistributions = []string{
	corev1.ServiceTrafficDistributionPreferClose,
	corev1.ServiceTrafficDistributionPreferSameZone,
	corev1.ServiceTrafficDistributionPreferSameNode,
}

// Validate checks a service received from a peer against what the
// ServiceImport, derived Service and EndpointSlices it becomes must be for
// the API server to take them, and against the per-service limits of l;
// now is this cluster's clock, for the export time. The error names the
// field, and is a *RuleError saying which rule the service broke.
func (s *Service) Validate(l Limits, now time.Time) error {
	l = l.WithDefaults()
	for _, f := range []struct{ field, value string }{{"namespace", s.Namespace}, {"name", s.Name}} {
		if msgs := validation.IsDNS1123Label(f.value); len(msgs) > 0 {
			return invalid("%s %q: %s", f.field, f.value, strings.Join(msgs, "; "))
		}
	}
	switch {
	case s.Exported.Before(earliestExport):
		return invalid("exported %s: not an export time", s.Exported.Format(time.RFC3339))
	case s.Exported.After(now.Add(MaxClockSkew)):
		return invalid("exported %s: more than %s after this cluster's time %s", s.Exported.Format(time.RFC3339), MaxClockSkew, now.UTC().Format(time.RFC3339))
	}
	if s.Type != mcsv1beta1.ClusterSetIP && s.Type != mcsv1beta1.Headless {
		return invalid("type %q: must be %s or %s", s.Type, mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless)
	}
	if err := validateServicePorts(s.Ports); err != nil {
		return err
	}
	if s.Type == mcsv1beta1.ClusterSetIP && len(s.Ports) == 0 {
		return invalid("ports: a %s service needs at least one", mcsv1beta1.ClusterSetIP)
	}
	if err := s.validateTraffic(); err != nil {
		return err
	}
	if err := s.validateMetadata(l); err != nil {
		return err
	}
	if len(s.Endpoints) > l.EndpointGroups {
		return &RuleError{Rule: RuleEndpointGroups, msg: fmt.Sprintf("endpoints: %d groups, at most %d", len(s.Endpoints), l.EndpointGroups)}
	}
	n := 0
	for i, g := range s.Endpoints {
		field := fmt.Sprintf("endpoints[%d]", i)
		if err := validateGroupPorts(field+".ports", g.Ports); err != nil {
			return err
		}
		if len(g.Endpoints) > maxGroupEndpoints {
			return invalid("%s.endpoints: %d, at most %d in one group (an EndpointSlice's bound)", field, len(g.Endpoints), maxGroupEndpoints)
		}
		for j, e := range g.Endpoints {
			if !e.IP.IsValid() {
				return invalid("%s.endpoints[%d].ip: not an address", field, j)
			}
			if e.Hostname != "" {
				if msgs := validation.IsDNS1123Label(e.Hostname); len(msgs) > 0 || len(e.Hostname) > maxHostnameLength {
					return invalid("%s.endpoints[%d].hostname %q: not a DNS label", field, j, e.Hostname)
				}
			}
		}
		n += len(g.Endpoints)
	}
	if n > l.Endpoints {
		return &RuleError{Rule: RuleEndpoints, msg: fmt.Sprintf("endpoints: %d, at most %d", n, l.Endpoints)}
	}
	return nil
}

// validateTraffic checks the fields the derived Service takes as they
// are: session affinity and its config, the traffic policies, the IP
// families.
func (s *Service) validateTraffic() error {
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
		if s.SessionAffinityConfig != nil {
			return invalid("sessionAffinityConfig: must not be set when sessionAffinity is %s", corev1.ServiceAffinityNone)
		}
	case corev1.ServiceAffinityClientIP:
		// Left out, the API server gives the derived Service its default.
		if c := s.SessionAffinityConfig; c != nil {
			if c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
				return invalid("sessionAffinityConfig.clientIP.timeoutSeconds: required when sessionAffinity is %s", corev1.ServiceAffinityClientIP)
			}
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > maxAffinitySeconds {
				return invalid("sessionAffinityConfig.clientIP.timeoutSeconds %d: must lie in 1..%d", t, maxAffinitySeconds)
			}
		}
	default:
		return invalid("sessionAffinity %q: must be None or ClientIP", s.SessionAffinity)
	}
	if p := s.InternalTrafficPolicy; p != nil && *p != corev1.ServiceInternalTrafficPolicyCluster && *p != corev1.ServiceInternalTrafficPolicyLocal {
		return invalid("internalTrafficPolicy %q: must be Cluster or Local", *p)
	}
	if d := s.TrafficDistribution; d != nil && !slices.Contains(trafficDistributions, *d) {
		return invalid("trafficDistribution %q: must be one of %s", *d, strings.Join(trafficDistributions, ", "))
	}
	if len(s.IPFamilies) > 2 {
		return invalid("ipFamilies: %d families, at most 2", len(s.IPFamilies))
	}
	for i, f := range s.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			return invalid("ipFamilies[%d] %q: must be IPv4 or IPv6", i, f)
		}
		if slices.Contains(s.IPFamilies[:i], f) {
			return invalid("ipFamilies[%d] %q: repeated", i, f)
		}
	}
	return nil
}

// validateMetadata checks the labels and annotations, which become the
// ServiceImport's.
func (s *Service) validateMetadata(l Limits) error {
	for _, m := range []struct {
		field string
		kv    map[string]string
	}{{"labels", s.Labels}, {"annotations", s.Annotations}} {
		for _, k := range slices.Sorted(maps.Keys(m.kv)) {
			v := m.kv[k]
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return invalid("%s: key %q: %s", m.field, k, strings.Join(msgs, "; "))
			}
			// Label values become the import's labels: they must be
			// valid there.
			if msgs := validation.IsValidLabelValue(v); m.field == "labels" && len(msgs) > 0 {
				return invalid("%s: %s: value %q: %s", m.field, k, v, strings.Join(msgs, "; "))
			}
		}
	}
	if size := s.metadataBytes(); size > l.MetadataBytes {
		return &RuleError{Rule: RuleMetadataBytes, msg: fmt.Sprintf("labels and annotations: %d bytes, at most %d", size, l.MetadataBytes)}
	}
	return nil
}

// metadataBytes is the size of the labels and annotations, keys and
// values.
func (s *Service) metadataBytes() int {
	n := 0
	for _, m := range []map[string]string{s.Labels, s.Annotations} {
		for k, v := range m {
			n += len(k) + len(v)
		}
	}
	return n
}

// validateServicePorts checks the ports of a service, which become the
// ServiceImport's and the derived Service's: names unique, and required
// when there are several; no protocol and number twice.
func validateServicePorts(ports []Port) error {
	if err := validateGroupPorts("ports", ports); err != nil {
		return err
	}
	type number struct {
		protocol corev1.Protocol
		port     int32
	}
	seen := make(map[number]bool, len(ports))
	for i, p := range ports {
		if p.Name == "" && len(ports) > 1 {
			return invalid("ports[%d].name: required when a service has several ports", i)
		}
		n := number{p.Protocol, p.Port}
		if seen[n] {
			return invalid("ports[%d]: %s %d repeated", i, p.Protocol, p.Port)
		}
		seen[n] = true
	}
	return nil
}

// validateGroupPorts checks the ports of an endpoint group, which become
// an EndpointSlice's: names unique (the empty one too).
func validateGroupPorts(field string, ports []Port) error {
	if len(ports) > maxPorts {
		return invalid("%s: %d ports, at most %d", field, len(ports), maxPorts)
	}
	names := make(map[string]bool, len(ports))
	for i, p := range ports {
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			return invalid("%s[%d].protocol %q: must be TCP, UDP or SCTP", field, i, p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return invalid("%s[%d].port %d: must lie in 1..65535", field, i, p.Port)
		}
		if p.Name != "" {
			if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
				return invalid("%s[%d].name %q: %s", field, i, p.Name, strings.Join(msgs, "; "))
			}
		}
		if names[p.Name] {
			return invalid("%s[%d].name %q: repeated", field, i, p.Name)
		}
		names[p.Name] = true
		// As the API server checks it: a qualified name, an IANA service
		// name or a prefixed one.
		if p.AppProtocol != nil {
			if msgs := validation.IsQualifiedName(*p.AppProtocol); len(msgs) > 0 {
				return invalid("%s[%d].appProtocol %q: %s", field, i, *p.AppProtocol, strings.Join(msgs, "; "))
			}
		}
	}
	return nil
}

// Set is one cluster's export set, by service.
type Set map[Key]Service

// Sorted returns the services ordered by key.
func (s Set) Sorted() []Service {
	out := make([]Service, 0, len(s))
	for _, svc := range s {
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b Service) int { return a.Key.Compare(b.Key) })
	return out
}

// Where a cluster keeps export sets, in each tenant namespace (the
// namespace of a peer's Configuration): the controller writes the local set
// for the gateway to send, the gateway writes the set the peer sent for
// the controller to import.
const (
	// ExchangeLabel marks both ConfigMaps; its value is ExportsRole or
	// ImportsRole.
	ExchangeLabel = "peerlink.io/service-exchange"
	ExportsRole   = "exports"
	ImportsRole   = "imports"
	// ExportsConfigMap and ImportsConfigMap are their names.
	ExportsConfigMap = "peerlink-service-exports"
	ImportsConfigMap = "peerlink-service-imports"
	// DataKey holds the encoded set in the ConfigMaps' binaryData.
	DataKey = "services.json.gz"
	// RejectedAnnotation on the imports ConfigMap counts what the gateway
	// rejected of the peer's set; RejectedSummaryAnnotation sums it up by
	// rule, with the first few (a RejectedSummary as JSON).
	RejectedAnnotation        = "peerlink.io/rejected-services"
	RejectedSummaryAnnotation = "peerlink.io/rejected-services-summary"
)

// ImportNamespaceLabel opts a namespace in to imports: a namespace labelled
// with it (value "true") gets the ServiceImports of the services exported
// under its name, besides the namespaces the controller allows by flag.
const ImportNamespaceLabel = "peerlink.io/service-imports"

// PreferLocalAnnotation on a ServiceExport, set to "false", turns off the
// preference for this cluster's own endpoints: by default, while the
// exported Service has a ready endpoint here, the clusterset IP of its
// import sends this cluster's calls to those endpoints only, and to the
// peers' when none here is ready.
const PreferLocalAnnotation = "peerlink.io/prefer-local-endpoints"

// limitField is a field of Limits and its name in the written form.
type limitField struct {
	name string
	v    *int
}

// limitFields are the fields of l, in their order.
func (l *Limits) limitFields() []limitField {
	return []limitField{
		{"services", &l.Services}, {"endpoints", &l.Endpoints}, {"endpoint-groups", &l.EndpointGroups},
		{"metadata-bytes", &l.MetadataBytes}, {"total-endpoints", &l.TotalEndpoints},
		{"total-endpoint-groups", &l.TotalEndpointGroups}, {"total-metadata-bytes", &l.TotalMetadataBytes},
		{"document-bytes", &l.DocumentBytes}, {"encoded-bytes", &l.EncodedBytes},
	}
}

// String writes l as ParseLimits reads it: "services=2000,endpoints=1000,...",
// every field.
func (l Limits) String() string {
	var parts []string
	for _, f := range l.limitFields() {
		parts = append(parts, f.name+"="+strconv.Itoa(*f.v))
	}
	return strings.Join(parts, ",")
}

// ParseLimits reads limits written as String writes them; the fields it
// does not name take the defaults. An unknown field, or a value that is
// not a positive number, is an error naming it.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	fields := l.limitFields()
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		i := slices.IndexFunc(fields, func(f limitField) bool { return f.name == name })
		if i < 0 {
			return Limits{}, fmt.Errorf("limit %q: not one of services, endpoints, endpoint-groups, metadata-bytes, total-endpoints, total-endpoint-groups, total-metadata-bytes, document-bytes, encoded-bytes", name)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return Limits{}, fmt.Errorf("limit %s=%q: want a number of at least 1", name, value)
		}
		*fields[i].v = n
	}
	return l.WithDefaults(), nil
}

// Equal tells whether two services are the same, field by field: cheaper
// than a comparison by reflection, for the thousands of services a change
// of one compares.
func (s *Service) Equal(o *Service) bool {
	return s.Key == o.Key && s.Exported.Equal(o.Exported) && s.Seen.Equal(o.Seen) && s.Type == o.Type &&
		slices.EqualFunc(s.Ports, o.Ports, Port.equal) && s.SessionAffinity == o.SessionAffinity &&
		affinityEqual(s.SessionAffinityConfig, o.SessionAffinityConfig) &&
		pointedEqual(s.InternalTrafficPolicy, o.InternalTrafficPolicy) && pointedEqual(s.TrafficDistribution, o.TrafficDistribution) &&
		slices.Equal(s.IPFamilies, o.IPFamilies) && maps.Equal(s.Labels, o.Labels) && maps.Equal(s.Annotations, o.Annotations) &&
		slices.EqualFunc(s.Endpoints, o.Endpoints, func(a, b EndpointGroup) bool {
			return slices.EqualFunc(a.Ports, b.Ports, Port.equal) && slices.Equal(a.Endpoints, b.Endpoints)
		})
}

func (p Port) equal(o Port) bool {
	return p.Name == o.Name && p.Protocol == o.Protocol && p.Port == o.Port && pointedEqual(p.AppProtocol, o.AppProtocol)
}

// pointedEqual tells whether a and b are both nil or point to equal values.
func pointedEqual[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func affinityEqual(a, b *corev1.SessionAffinityConfig) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.ClientIP == nil || b.ClientIP == nil:
		return a.ClientIP == b.ClientIP
	default:
		return pointedEqual(a.ClientIP.TimeoutSeconds, b.ClientIP.TimeoutSeconds)
	}
}
