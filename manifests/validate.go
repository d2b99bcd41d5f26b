package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/templates"
)

// InvalidError reports every field of a built or decoded object that the API
// would refuse or that the controller could not use.
type InvalidError struct {
	// Kind, Namespace and Name identify the object.
	Kind, Namespace, Name string
	// Fields lists the problems, each naming its field path.
	Fields field.ErrorList
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Error()
	}
	return fmt.Sprintf("invalid %s %s/%s: %s", e.Kind, e.Namespace, e.Name, strings.Join(msgs, "; "))
}

// WithNames rewrites the field errors of an *InvalidError to name what the
// caller took each field from (its flag), when names has it: "--node-port
// (spec.endpoint.nodePort): Forbidden: only allowed with serviceType
// NodePort or LoadBalancer". A field of a list item
// (spec.remote.cidr.pod[1]) is looked up without its index too. Other
// errors are kept as they are.
func WithNames(err error, names map[string]string) error {
	var inv *InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	msgs := make([]string, len(inv.Fields))
	for i, f := range inv.Fields {
		name, ok := names[f.Field]
		if !ok {
			name, ok = names[listIndex.ReplaceAllString(f.Field, "")]
		}
		if ok {
			msgs[i] = name + " (" + f.Field + "): " + f.ErrorBody()
		} else {
			msgs[i] = f.Error()
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// listIndex matches the index of a list item in a field path.
var listIndex = regexp.MustCompile(`\[\d+\]`)

// check returns an *InvalidError when Validate finds anything.
func check(obj runtime.Object) error {
	errs := Validate(obj)
	if len(errs) == 0 {
		return nil
	}
	e := &InvalidError{Kind: obj.GetObjectKind().GroupVersionKind().Kind, Fields: errs}
	if m, ok := obj.(interface{ GetName() string }); ok {
		e.Name = m.GetName()
	}
	if m, ok := obj.(interface{ GetNamespace() string }); ok {
		e.Namespace = m.GetNamespace()
	}
	return e
}

// Validate checks an object of the peering API beyond what its Go type
// enforces: the mandatory label, CIDRs, ports, MTU, keys and the rules the
// CRD expresses in CEL. A zero number means "not set" (the CRD default
// applies), as it does after decoding. Other kinds are not checked.
func Validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *netv1beta1.Configuration:
		errs := validateLabels(o.Labels)
		errs = append(errs, validateName(o.Name)...)
		if o.Spec.Local != nil {
			errs = append(errs, validateClusterConfig(*o.Spec.Local, field.NewPath("spec", "local"))...)
		}
		return append(errs, validateClusterConfig(o.Spec.Remote, field.NewPath("spec", "remote"))...)
	case *netv1beta1.GatewayServer:
		errs := validateGateway(&o.ObjectMeta, o.Spec.ServerTemplateRef, "serverTemplateRef", templates.ServerTemplateKind, o.Spec.MTU, o.Spec.Replicas)
		return append(errs, validateServerEndpoint(o.Spec.Endpoint, field.NewPath("spec", "endpoint"))...)
	case *netv1beta1.GatewayClient:
		errs := validateGateway(&o.ObjectMeta, o.Spec.ClientTemplateRef, "clientTemplateRef", templates.ClientTemplateKind, o.Spec.MTU, o.Spec.Replicas)
		return append(errs, validateClientEndpoint(o.Spec.Endpoint, field.NewPath("spec", "endpoint"))...)
	case *netv1beta1.PublicKey:
		errs := validateLabels(o.Labels)
		errs = append(errs, validateName(o.Name)...)
		errs = append(errs, validateKey(o.Spec.PublicKey, field.NewPath("spec", "publicKey"))...)
		if o.Spec.NextPublicKey != nil {
			p := field.NewPath("spec", "nextPublicKey")
			errs = append(errs, validateKey(o.Spec.NextPublicKey, p)...)
			if bytes.Equal(o.Spec.NextPublicKey, o.Spec.PublicKey) {
				errs = append(errs, field.Invalid(p, "<the same key>", "must differ from spec.publicKey: it is the key the gateway rotates to"))
			}
		}
		return errs
	}
	return nil
}

// validateKey checks a WireGuard public key at path.
func validateKey(key []byte, path *field.Path) field.ErrorList {
	if n := len(key); n != KeyLength {
		return field.ErrorList{field.Invalid(path, fmt.Sprintf("<%d bytes>", n),
			fmt.Sprintf("must be the base64 of exactly %d bytes, as wg pubkey prints it", KeyLength))}
	}
	if bytes.Count(key, []byte{0}) == KeyLength {
		return field.ErrorList{field.Invalid(path, "<all zero>",
			"the all-zero key is no key: use the one `wg pubkey` or `peerlink generate publickey` prints")}
	}
	return nil
}

// RemoteClusterIDPath returns the field path of the liqo.io/remote-cluster-id
// label, for messages about it.
func RemoteClusterIDPath() *field.Path {
	return field.NewPath("metadata", "labels").Key(netv1beta1.RemoteClusterIDLabel)
}

func validateLabels(labels map[string]string) field.ErrorList {
	remoteClusterIDPath := RemoteClusterIDPath()
	id, ok := labels[netv1beta1.RemoteClusterIDLabel]
	if !ok || id == "" {
		return field.ErrorList{field.Required(remoteClusterIDPath, "set it to the ID of the peer cluster")}
	}
	if msgs := validation.IsValidLabelValue(id); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(remoteClusterIDPath, id, strings.Join(msgs, "; "))}
	}
	return nil
}

func validateName(name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(field.NewPath("metadata", "name"), "")}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, strings.Join(msgs, "; "))}
	}
	return nil
}

func validateGatewayName(name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(field.NewPath("metadata", "name"), "")}
	}
	if err := ValidateObjectName(name); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name,
			"gw-<name> must be a valid Service name (DNS-1035 label, at most 63 characters)")}
	}
	return nil
}

func validateClusterConfig(c netv1beta1.ClusterConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	cidrPath := path.Child("cidr")
	if len(c.CIDR.Pod) == 0 {
		errs = append(errs, field.Required(cidrPath.Child("pod"), "at least one pod CIDR"))
	}
	// Parsed prefixes and their paths, index-aligned, for the overlap check.
	var prefixes []netip.Prefix
	var paths []*field.Path
	for _, list := range []struct {
		path  *field.Path
		cidrs []netv1beta1.CIDR
	}{{cidrPath.Child("pod"), c.CIDR.Pod}, {cidrPath.Child("external"), c.CIDR.External}} {
		if len(list.cidrs) > netv1beta1.MaxCIDRs {
			// Each range costs routes on every node: a longer list is
			// refused whole, before any of it is parsed.
			errs = append(errs, field.TooMany(list.path, len(list.cidrs), netv1beta1.MaxCIDRs))
			continue
		}
		for i, s := range list.cidrs {
			p, err := ParseCIDR(string(s))
			if err != nil {
				errs = append(errs, field.Invalid(list.path.Index(i), string(s), err.Error()))
			} else if err := rangepolicy.CheckRoutable(p); err != nil {
				errs = append(errs, field.Invalid(list.path.Index(i), string(s), err.Error()))
			}
			prefixes = append(prefixes, p)
			paths = append(paths, list.path.Index(i))
		}
	}
	if i, j, ok := cidr.FirstOverlap(prefixes); ok {
		errs = append(errs, field.Invalid(paths[j], prefixes[j].String(), "overlaps "+paths[i].String()+" "+prefixes[i].String()))
	}
	return errs
}

func validateTemplateRef(ref corev1.ObjectReference, kind string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIVersion != "" && ref.APIVersion != netv1beta1.GroupVersion.String() {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), ref.APIVersion, []string{netv1beta1.GroupVersion.String()}))
	}
	if ref.Kind != "" && ref.Kind != kind {
		errs = append(errs, field.NotSupported(path.Child("kind"), ref.Kind, []string{kind}))
	}
	return errs
}

// validateGateway checks what GatewayServer and GatewayClient have alike:
// labels, name, template reference (spec.<refField>), MTU and replicas.
func validateGateway(meta *metav1.ObjectMeta, ref corev1.ObjectReference, refField, templateKind string, mtu int, replicas int32) field.ErrorList {
	errs := validateLabels(meta.Labels)
	errs = append(errs, validateGatewayName(meta.Name)...)
	spec := field.NewPath("spec")
	errs = append(errs, validateTemplateRef(ref, templateKind, spec.Child(refField))...)
	errs = append(errs, validateSet(replicas, spec.Child("replicas"), ValidateReplicas)...)
	return append(errs, validateSet(mtu, spec.Child("mtu"), ValidateMTU)...)
}

// validateSet checks v with check unless it is 0, which means "not set".
func validateSet[T int | int32](v T, path *field.Path, check func(T) error) field.ErrorList {
	if v == 0 {
		return nil
	}
	if err := check(v); err != nil {
		return field.ErrorList{field.Invalid(path, v, err.Error())}
	}
	return nil
}

// serviceTypes returns the Service types a GatewayServer may use.
func serviceTypes() []corev1.ServiceType {
	return []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, corev1.ServiceTypeClusterIP}
}

// ParseServiceType accepts the Service types a GatewayServer may use.
func ParseServiceType(s string) (corev1.ServiceType, error) {
	return choice.Parse("service type", s, serviceTypes()...)
}

func validateServerEndpoint(ep netv1beta1.Endpoint, path *field.Path) field.ErrorList {
	errs := validateSet(ep.Port, path.Child("port"), ValidatePort)
	// An empty type is the CRD default, ClusterIP.
	typ := ep.ServiceType
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	} else if _, err := ParseServiceType(string(typ)); err != nil {
		errs = append(errs, field.NotSupported(path.Child("serviceType"), typ, serviceTypes()))
	}
	if ep.NodePort != nil && *ep.NodePort != 0 {
		np := path.Child("nodePort")
		errs = append(errs, validateSet(*ep.NodePort, np, ValidatePort)...)
		if typ == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(np, "only allowed with serviceType NodePort or LoadBalancer"))
		}
	}
	errs = append(errs, validatePortList(ep.Ports, path.Child("ports"), "port", ValidatePort)...)
	errs = append(errs, validatePortList(ep.NodePorts, path.Child("nodePorts"), "node port", func(p int32) error {
		if p == 0 {
			return nil
		}
		return ValidatePort(p)
	})...)
	if slices.ContainsFunc(ep.NodePorts, func(p int32) bool { return p != 0 }) && typ == corev1.ServiceTypeClusterIP {
		errs = append(errs, field.Forbidden(path.Child("nodePorts"), "only allowed with serviceType NodePort or LoadBalancer"))
	}
	if ep.LoadBalancerIP != nil {
		lb := path.Child("loadBalancerIP")
		if addr, err := netip.ParseAddr(*ep.LoadBalancerIP); err != nil || addr.Zone() != "" {
			errs = append(errs, field.Invalid(lb, *ep.LoadBalancerIP, "must be an IP address"))
		}
		if typ != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(lb, "only allowed with serviceType LoadBalancer"))
		}
	}
	return errs
}

// validatePortList checks the list form of a port: at most one entry, as a
// gateway listens on one port, each valid by check.
func validatePortList(ports []int32, path *field.Path, what string, check func(int32) error) field.ErrorList {
	var errs field.ErrorList
	if len(ports) > netv1beta1.MaxEndpointPorts {
		return field.ErrorList{field.TooMany(path, len(ports), netv1beta1.MaxEndpointPorts)}
	}
	if len(ports) > 1 {
		errs = append(errs, field.Invalid(path, ports, fmt.Sprintf("takes one %s: a gateway runs one WireGuard tunnel, which listens on one port", what)))
	}
	for i, p := range ports {
		if err := check(p); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), p, err.Error()))
		}
	}
	return errs
}

func validateClientEndpoint(ep netv1beta1.GatewayClientEndpoint, path *field.Path) field.ErrorList {
	errs := validateSet(ep.Port, path.Child("port"), ValidatePort)
	if ep.Protocol != "" && ep.Protocol != corev1.ProtocolUDP {
		errs = append(errs, field.NotSupported(path.Child("protocol"), ep.Protocol, []corev1.Protocol{corev1.ProtocolUDP}))
	}
	if len(ep.Addresses) > netv1beta1.MaxEndpointAddresses {
		return append(errs, field.TooMany(path.Child("addresses"), len(ep.Addresses), netv1beta1.MaxEndpointAddresses))
	}
	seen := map[string]int{}
	for i, a := range ep.Addresses {
		if err := ValidateAddress(a); err != nil {
			errs = append(errs, field.Invalid(path.Child("addresses").Index(i), a, err.Error()))
		}
		if j, dup := seen[a]; dup {
			errs = append(errs, field.Duplicate(path.Child("addresses").Index(i), fmt.Sprintf("%s, as addresses[%d]", a, j)))
		}
		seen[a] = i
	}
	portErrs := validatePortList(ep.Ports, path.Child("ports"), "port", ValidatePort)
	errs = append(errs, portErrs...)
	switch {
	case len(portErrs) > 0:
		// Port is judged against a list that holds one valid port.
	case ep.Port != 0 && len(ep.Ports) > 0 && ep.Port != ep.Ports[0]:
		errs = append(errs, field.Invalid(path.Child("port"), ep.Port, fmt.Sprintf("must match %s, %d", path.Child("ports").Index(0), ep.Ports[0])))
	case len(ep.Addresses) > 0 && ep.Resolved().Port == 0:
		errs = append(errs, field.Required(path.Child("port"), "the addresses are set, so the server's port is needed too"))
	}
	return errs
}

// ValidateAddress accepts an IP address or a DNS name where a server endpoint
// is expected, holding a name to the rules of an address where it is one in
// disguise. Refused are:
//   - an address rangepolicy.CheckServerAddr refuses (unspecified, loopback,
//     link-local, multicast, broadcast);
//   - a name that always means this host or its link: localhost and
//     *.localhost (RFC 6761), localhost.localdomain (the conventional
//     /etc/hosts name), and *.local, which multicast DNS resolves on the
//     node's own link (RFC 6762) and the default cluster domain resolves to
//     this cluster's own Services (svc.cluster.local);
//   - a name made of numbers only, which resolvers that read addresses as
//     inet_aton does (hexadecimal 0x7f000001, octal 0177.0.0.1, fewer than
//     four parts 127.1) take for an address: written so, it escapes the
//     address rules; and a name whose last label is all digits, which no
//     DNS name has (999.1.1.1 is neither an address nor a name);
//   - a name that holds a refused address, dotted or dashed, as wildcard
//     DNS services resolve them (127.0.0.1.nip.io, app-169-254-169-254.sslip.io).
//
// A name that resolves elsewhere to a refused address is caught where it
// is resolved: the gateway agent holds the addresses it resolves to the
// same rule.
func ValidateAddress(a string) error {
	if ip, err := netip.ParseAddr(a); err == nil {
		return rangepolicy.CheckServerAddr(ip)
	}
	if msgs := validation.IsDNS1123Subdomain(a); len(msgs) > 0 {
		return fmt.Errorf("%q is neither an IP address nor a DNS name", a)
	}
	labels := strings.Split(a, ".")
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("%q is neither an IP address nor a DNS name: a name's last label is not all digits", a)
	}
	if numericName(labels) {
		return fmt.Errorf("%q is an IPv4 address in a form some resolvers read (hexadecimal, octal or fewer than four parts), not a DNS name: write the address in dotted decimal", a)
	}
	switch {
	case a == "localhost" || strings.HasSuffix(a, ".localhost") || a == "localhost.localdomain":
		return fmt.Errorf("%q always names this host (loopback), not a server", a)
	case strings.HasSuffix(a, ".local"):
		return fmt.Errorf("%q is a .local name, which multicast DNS resolves on the node's own link (link-local) and the default cluster domain to this cluster's own Services (cluster.local), not a server", a)
	}
	for _, ip := range embeddedAddrs(labels) {
		if err := rangepolicy.CheckServerAddr(ip); err != nil {
			return fmt.Errorf("%q names the address %s, as wildcard DNS resolves it: %w", a, ip, err)
		}
	}
	return nil
}

// numericName reports whether every label of a name is a number as
// inet_aton reads one (decimal, octal with a leading 0, hexadecimal with
// 0x), in at most four labels: such a name is an IPv4 address to the C
// resolver.
func numericName(labels []string) bool {
	if len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		digits := l
		if h, ok := strings.CutPrefix(l, "0x"); ok {
			if digits = strings.Trim(h, "0123456789abcdef"); digits != "" {
				return false
			}
			continue
		}
		if strings.Trim(digits, "0123456789") != "" || digits == "" {
			return false
		}
	}
	return true
}

// embeddedAddrs are the IPv4 addresses a name holds in the forms wildcard
// DNS services resolve: four decimal labels in a row (10.0.0.1.nip.io,
// app.10.0.0.1.nip.io) or a label ending in four dashed numbers
// (10-0-0-1.sslip.io, app-10-0-0-1.nip.io).
func embeddedAddrs(labels []string) []netip.Addr {
	var out []netip.Addr
	for i := 0; i+4 < len(labels); i++ {
		if ip, err := netip.ParseAddr(strings.Join(labels[i:i+4], ".")); err == nil {
			out = append(out, ip)
		}
	}
	for _, l := range labels[:len(labels)-1] {
		if parts := strings.Split(l, "-"); len(parts) >= 4 {
			if ip, err := netip.ParseAddr(strings.Join(parts[len(parts)-4:], ".")); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out
}

// ValidateKeyText checks the keys of a PublicKey manifest as they are
// written, before decoding: spec.publicKey and, when set,
// spec.nextPublicKey must each be a key as ParsePublicKey reads it, the
// rule the CRD's pattern enforces. Decoding alone would take a key in a
// form the API server refuses (with a line break, or trailing bits set).
// Other kinds are not checked.
func ValidateKeyText(u *unstructured.Unstructured) field.ErrorList {
	if !IsPeeringKind(u) || u.GetKind() != KindPublicKey {
		return nil
	}
	var errs field.ErrorList
	for _, name := range []string{"publicKey", "nextPublicKey"} {
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", name)
		if !found || v == nil && name == "nextPublicKey" {
			continue
		}
		path := field.NewPath("spec", name)
		s, ok := v.(string)
		if !ok {
			errs = append(errs, field.Invalid(path, v, "must be a string: the base64 of the key, as wg pubkey prints it"))
			continue
		}
		if _, err := ParsePublicKey(s); err != nil {
			errs = append(errs, field.Invalid(path, s, err.Error()))
		}
	}
	return errs
}
