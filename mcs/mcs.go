package mcs

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
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
	// Exported is when the ServiceExport was created: the oldest export of
	// a service wins its conflicts.
	Exported              time.Time                            `json:"exported"`
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

// Limits bound what a peer may publish; exceeding them is refused on
// receipt.
type Limits struct {
	// Services is the most services one peer may export.
	Services int
	// Endpoints is the most endpoints one exported service may have.
	Endpoints int
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{Services: 2000, Endpoints: 1000}

// Fixed bounds of one service, whatever the limits.
const (
	maxPorts          = 100
	maxEndpointGroups = 100
	maxMetadataBytes  = 64 << 10
	maxHostnameLength = 63
)

// Validate checks a service received from a peer; errors name the field.
func (s *Service) Validate(l Limits) error {
	for _, f := range []struct{ field, value string }{{"namespace", s.Namespace}, {"name", s.Name}} {
		if msgs := validation.IsDNS1123Label(f.value); len(msgs) > 0 {
			return fmt.Errorf("%s %q: %s", f.field, f.value, strings.Join(msgs, "; "))
		}
	}
	if s.Type != mcsv1beta1.ClusterSetIP && s.Type != mcsv1beta1.Headless {
		return fmt.Errorf("type %q: must be %s or %s", s.Type, mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless)
	}
	if err := validatePorts("ports", s.Ports); err != nil {
		return err
	}
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		return fmt.Errorf("sessionAffinity %q: must be None or ClientIP", s.SessionAffinity)
	}
	if len(s.IPFamilies) > 2 {
		return fmt.Errorf("ipFamilies: %d families, at most 2", len(s.IPFamilies))
	}
	size := 0
	for field, m := range map[string]map[string]string{"labels": s.Labels, "annotations": s.Annotations} {
		for k, v := range m {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return fmt.Errorf("%s: key %q: %s", field, k, strings.Join(msgs, "; "))
			}
			// Label values become the import's labels: they must be
			// valid there.
			if msgs := validation.IsValidLabelValue(v); field == "labels" && len(msgs) > 0 {
				return fmt.Errorf("%s: %s: value %q: %s", field, k, v, strings.Join(msgs, "; "))
			}
			size += len(k) + len(v)
		}
	}
	if size > maxMetadataBytes {
		return fmt.Errorf("labels and annotations: %d bytes, at most %d", size, maxMetadataBytes)
	}
	if len(s.Endpoints) > maxEndpointGroups {
		return fmt.Errorf("endpoints: %d groups, at most %d", len(s.Endpoints), maxEndpointGroups)
	}
	n := 0
	for i, g := range s.Endpoints {
		if err := validatePorts(fmt.Sprintf("endpoints[%d].ports", i), g.Ports); err != nil {
			return err
		}
		for j, e := range g.Endpoints {
			if !e.IP.IsValid() {
				return fmt.Errorf("endpoints[%d].endpoints[%d].ip: not an address", i, j)
			}
			if e.Hostname != "" {
				if msgs := validation.IsDNS1123Label(e.Hostname); len(msgs) > 0 || len(e.Hostname) > maxHostnameLength {
					return fmt.Errorf("endpoints[%d].endpoints[%d].hostname %q: not a DNS label", i, j, e.Hostname)
				}
			}
		}
		n += len(g.Endpoints)
	}
	if n > l.Endpoints {
		return fmt.Errorf("endpoints: %d, at most %d", n, l.Endpoints)
	}
	return nil
}

func validatePorts(field string, ports []Port) error {
	if len(ports) > maxPorts {
		return fmt.Errorf("%s: %d ports, at most %d", field, len(ports), maxPorts)
	}
	for i, p := range ports {
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			return fmt.Errorf("%s[%d].protocol %q: must be TCP, UDP or SCTP", field, i, p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return fmt.Errorf("%s[%d].port %d: must lie in 1..65535", field, i, p.Port)
		}
		if p.Name != "" {
			if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
				return fmt.Errorf("%s[%d].name %q: %s", field, i, p.Name, strings.Join(msgs, "; "))
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
	// rejected of the peer's set.
	RejectedAnnotation = "peerlink.io/rejected-services"
)

// ImportNamespaceLabel opts a namespace in to imports: a namespace labelled
// with it (value "true") gets the ServiceImports of the services exported
// under its name, besides the namespaces the controller allows by flag.
const ImportNamespaceLabel = "peerlink.io/service-imports"
