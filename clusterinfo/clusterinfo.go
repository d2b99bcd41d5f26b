package clusterinfo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// Name is the name of the ConfigMap, in the controller's namespace.
const Name = "peerlink-cluster-info"

// The keys of the ConfigMap's data. Lists are comma-separated.
const (
	KeyClusterID        = "clusterID"
	KeyPodCIDRs         = "podCIDRs"
	KeyServiceCIDR      = "serviceCIDR"
	KeyExternalCIDR     = "externalCIDR"
	KeyInternalCIDR     = "internalCIDR"
	KeyAllowedPeerCIDRs = "allowedPeerCIDRs"
	// KeyRoutedPeerCIDRs is the address plan declared for peers: empty
	// when every peer range is remapped.
	KeyRoutedPeerCIDRs = "routedPeerCIDRs"
	// KeyControllerVersion is the version of the controller that publishes
	// the ConfigMap, which the CLI compares with its own.
	KeyControllerVersion = "controllerVersion"
)

// maxClusterIDLength keeps liqo-tenant-<cluster ID> a valid namespace name.
const maxClusterIDLength = validation.DNS1123LabelMaxLength - len(netv1beta1.TenantNamespacePrefix)

// ErrNotPublished says the ConfigMap does not exist: peerlink is not
// installed, or its controller has not started yet.
var ErrNotPublished = errors.New("not published")

// Info are the facts one cluster publishes about itself.
type Info struct {
	// ClusterID identifies the cluster to its peers.
	ClusterID string
	// PodCIDRs are the cluster's pod ranges.
	PodCIDRs []netip.Prefix
	// ServiceCIDR is the range of Service cluster IPs; zero when unknown.
	ServiceCIDR netip.Prefix
	// ExternalCIDR holds the addresses of non-pod endpoints as the peers
	// see them.
	ExternalCIDR netip.Prefix
	// InternalCIDR is set aside for the overlay between nodes and gateways.
	InternalCIDR netip.Prefix
	// AllowedPeer is the allowlist of the ranges a peer may declare; empty
	// means rangepolicy.DefaultAllowed.
	AllowedPeer []netip.Prefix
	// RoutedPeer is the address plan declared for peers: only inside it
	// is a peer's range routed as it is. Empty: every range is remapped.
	RoutedPeer []netip.Prefix
	// Sources say where the cluster ID, the pod CIDRs and the service CIDR
	// come from (SourceGiven, or how they were detected), by the key of
	// the fact (KeyClusterID, ...). They are published under
	// <key>Source; a fact without one is left out.
	Sources map[string]string
	// ControllerVersion is the version of the controller publishing the
	// facts; empty when it names none.
	ControllerVersion string
}

// SourceKey is the ConfigMap key that says where the fact under key comes
// from.
func SourceKey(key string) string { return key + "Source" }

// maxSourceLength bounds a source read back: longer ones are not from
// peerlink and are ignored.
const maxSourceLength = 128

// detectableKeys are the keys of the facts the controller detects when they
// are not given.
var detectableKeys = []string{KeyClusterID, KeyPodCIDRs, KeyServiceCIDR}

// LocalRanges returns the ranges a peer may reach here: the pod CIDRs and
// the external CIDR when known.
func (i Info) LocalRanges() []netip.Prefix {
	out := slices.Clone(i.PodCIDRs)
	if i.ExternalCIDR.IsValid() {
		out = append(out, i.ExternalCIDR)
	}
	return out
}

// Ranges returns every range known to be in use here: the pod, service,
// external and internal CIDRs, those that are set.
func (i Info) Ranges() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range append(slices.Clone(i.PodCIDRs), i.ServiceCIDR, i.ExternalCIDR, i.InternalCIDR) {
		if p.IsValid() {
			out = append(out, p)
		}
	}
	return out
}

// PeerPolicy returns the policy a peer's declared ranges are checked with.
func (i Info) PeerPolicy() rangepolicy.Policy {
	return rangepolicy.Policy{Allowed: i.AllowedPeer, Routed: i.RoutedPeer}
}

// Data encodes the facts as the ConfigMap's data. The allowlist is written
// as in force, the default included, so that a reader needs no knowledge of
// the default.
func (i Info) Data() map[string]string {
	str := func(p netip.Prefix) string {
		if !p.IsValid() {
			return ""
		}
		return p.String()
	}
	data := map[string]string{
		KeyClusterID:         i.ClusterID,
		KeyPodCIDRs:          rangepolicy.Format(i.PodCIDRs),
		KeyServiceCIDR:       str(i.ServiceCIDR),
		KeyExternalCIDR:      str(i.ExternalCIDR),
		KeyInternalCIDR:      str(i.InternalCIDR),
		KeyAllowedPeerCIDRs:  rangepolicy.Format(i.PeerPolicy().AllowedRanges()),
		KeyRoutedPeerCIDRs:   rangepolicy.Format(i.RoutedPeer),
		KeyControllerVersion: i.ControllerVersion,
	}
	for _, k := range detectableKeys {
		if src := i.Sources[k]; src != "" {
			data[SourceKey(k)] = src
		}
	}
	return data
}

// ApplyConfiguration is the ConfigMap holding i in namespace, for a
// server-side apply.
func (i Info) ApplyConfiguration(namespace string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(Name, namespace).
		WithLabels(map[string]string{"app.kubernetes.io/part-of": "peerlink"}).
		WithData(i.Data())
}

// Decode reads the facts from the ConfigMap's data: a valid cluster ID and
// at least one pod CIDR are required, the other ranges are optional. Errors
// name the key.
func Decode(data map[string]string) (Info, error) {
	var i Info
	i.ClusterID = strings.TrimSpace(data[KeyClusterID])
	if err := ValidateClusterID(i.ClusterID); err != nil {
		return Info{}, fmt.Errorf("data.%s: %w", KeyClusterID, err)
	}
	var err error
	if i.PodCIDRs, err = rangepolicy.ParseList(data[KeyPodCIDRs]); err != nil {
		return Info{}, fmt.Errorf("data.%s: %w", KeyPodCIDRs, err)
	}
	if len(i.PodCIDRs) == 0 {
		return Info{}, fmt.Errorf("data.%s: no pod CIDR", KeyPodCIDRs)
	}
	for _, f := range []struct {
		key string
		dst *netip.Prefix
	}{
		{KeyServiceCIDR, &i.ServiceCIDR},
		{KeyExternalCIDR, &i.ExternalCIDR},
		{KeyInternalCIDR, &i.InternalCIDR},
	} {
		v := strings.TrimSpace(data[f.key])
		if v == "" {
			continue
		}
		if *f.dst, err = cidr.ParseNetwork(v); err != nil {
			return Info{}, fmt.Errorf("data.%s: %w", f.key, err)
		}
	}
	if i.AllowedPeer, err = rangepolicy.ParseList(data[KeyAllowedPeerCIDRs]); err != nil {
		return Info{}, fmt.Errorf("data.%s: %w", KeyAllowedPeerCIDRs, err)
	}
	if i.RoutedPeer, err = rangepolicy.ParseList(data[KeyRoutedPeerCIDRs]); err != nil {
		return Info{}, fmt.Errorf("data.%s: %w", KeyRoutedPeerCIDRs, err)
	}
	for _, k := range detectableKeys {
		if src := strings.TrimSpace(data[SourceKey(k)]); src != "" && len(src) <= maxSourceLength {
			if i.Sources == nil {
				i.Sources = map[string]string{}
			}
			i.Sources[k] = src
		}
	}
	i.ControllerVersion = strings.TrimSpace(data[KeyControllerVersion])
	return i, nil
}

// Read reads and decodes the ConfigMap in namespace. A missing ConfigMap is
// ErrNotPublished; other errors name the ConfigMap.
func Read(ctx context.Context, c client.Reader, namespace string) (Info, error) {
	cm, err := get(ctx, c, namespace)
	if err != nil {
		return Info{}, err
	}
	i, err := Decode(cm.Data)
	if err != nil {
		return Info{}, fmt.Errorf("configmap %s/%s: %w", namespace, Name, err)
	}
	return i, nil
}

// ReadControllerVersion reads the controller's version from the ConfigMap
// in namespace, whatever the state of the other facts: empty when the
// controller publishes none. Errors are those of Read.
func ReadControllerVersion(ctx context.Context, c client.Reader, namespace string) (string, error) {
	cm, err := get(ctx, c, namespace)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(cm.Data[KeyControllerVersion]), nil
}

// get reads the ConfigMap in namespace; a missing one is ErrNotPublished.
func get(ctx context.Context, c client.Reader, namespace string) (*corev1.ConfigMap, error) {
	key := types.NamespacedName{Namespace: namespace, Name: Name}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("configmap %s: %w", key, ErrNotPublished)
		}
		return nil, fmt.Errorf("get configmap %s: %w", key, err)
	}
	return &cm, nil
}

// ValidateClusterID checks that id can identify a cluster: a DNS-1123 label
// short enough that liqo-tenant-<id> is a valid namespace name.
func ValidateClusterID(id string) error {
	if id == "" {
		return errors.New("cluster id is empty")
	}
	if msgs := validation.IsDNS1123Label(id); len(msgs) > 0 {
		return fmt.Errorf("cluster id %q is not valid: %s", id, strings.Join(msgs, "; "))
	}
	if len(id) > maxClusterIDLength {
		return fmt.Errorf("cluster id %q is longer than %d characters, so %s%s is not a valid namespace name",
			id, maxClusterIDLength, netv1beta1.TenantNamespacePrefix, id)
	}
	return nil
}
