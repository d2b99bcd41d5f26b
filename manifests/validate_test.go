package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

func validServer() *netv1beta1.GatewayServer {
	gw, err := GatewayServer(GatewayServerOptions{
		Peer:        Peer{RemoteClusterID: "cluster-a"},
		ServiceType: corev1.ServiceTypeNodePort, Port: 51840, NodePort: 30851, MTU: 1340,
	})
	if err != nil {
		panic(err)
	}
	return gw
}

// validObjects are one valid object of each kind Validate checks, for a case
// to break one of.
type validObjects struct {
	server *netv1beta1.GatewayServer
	client *netv1beta1.GatewayClient
	conf   *netv1beta1.Configuration
	key    *netv1beta1.PublicKey
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(validObjects)
		// want is the field path and a piece of the message; empty: valid.
		want string
	}{
		{"valid", func(validObjects) {}, ""},
		{"missing label", func(o validObjects) { o.server.Labels = nil }, "metadata.labels[liqo.io/remote-cluster-id]: Required"},
		{"node port on ClusterIP", func(o validObjects) { o.server.Spec.Endpoint.ServiceType = corev1.ServiceTypeClusterIP }, "spec.endpoint.nodePort: Forbidden"},
		{"load balancer IP on NodePort", func(o validObjects) { o.server.Spec.Endpoint.LoadBalancerIP = ptr.To("192.0.2.1") }, "spec.endpoint.loadBalancerIP: Forbidden"},
		{"IPv6 load balancer IP", func(o validObjects) {
			o.server.Spec.Endpoint.ServiceType, o.server.Spec.Endpoint.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, ptr.To("fd30:0:1::100")
		}, ""},
		{"load balancer name", func(o validObjects) {
			o.server.Spec.Endpoint.ServiceType, o.server.Spec.Endpoint.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, ptr.To("lb.example")
		}, "spec.endpoint.loadBalancerIP: Invalid value: \"lb.example\": must be an IP address"},
		{"port out of range", func(o validObjects) { o.server.Spec.Endpoint.Port = 70000 }, "spec.endpoint.port: Invalid value: 70000"},
		{"unknown service type", func(o validObjects) { o.server.Spec.Endpoint.ServiceType = "External" }, "spec.endpoint.serviceType: Unsupported value"},
		{"template kind", func(o validObjects) { o.server.Spec.ServerTemplateRef.Kind = "WgGatewayClientTemplate" }, "spec.serverTemplateRef.kind: Unsupported value"},
		{"client MTU", func(o validObjects) { o.client.Spec.MTU = 100 }, "spec.mtu: Invalid value: 100"},
		{"client addresses without port", func(o validObjects) { o.client.Spec.Endpoint.Port = 0 }, "spec.endpoint.port: Required"},
		{"client protocol", func(o validObjects) { o.client.Spec.Endpoint.Protocol = corev1.ProtocolTCP }, "spec.endpoint.protocol: Unsupported value"},
		{"client address", func(o validObjects) { o.client.Spec.Endpoint.Addresses = []string{"a b"} }, "spec.endpoint.addresses[0]: Invalid value"},
		{"no pod CIDR", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = nil }, "spec.remote.cidr.pod: Required"},
		{"bad CIDR", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = []netv1beta1.CIDR{"10.244.0.0/33"} }, "spec.remote.cidr.pod[0]: Invalid value"},
		{"host bits", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"10.70.0.1/16"} }, "spec.remote.cidr.external[0]: Invalid value: \"10.70.0.1/16\": invalid CIDR: \"10.70.0.1/16\": host bits set"},
		{"overlap", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"10.244.128.0/17"} }, "spec.remote.cidr.external[0]: Invalid value: \"10.244.128.0/17\": overlaps spec.remote.cidr.pod[0]"},
		{"local CIDR", func(o validObjects) {
			o.conf.Spec.Local = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{Pod: []netv1beta1.CIDR{"x"}}}
		}, "spec.local.cidr.pod[0]: Invalid value"},
		{"short key", func(o validObjects) { o.key.Spec.PublicKey = o.key.Spec.PublicKey[:31] }, "spec.publicKey: Invalid value: \"<31 bytes>\""},
		{"all-zero key", func(o validObjects) { o.key.Spec.PublicKey = make([]byte, KeyLength) }, "spec.publicKey: Invalid value: \"<all zero>\""},
		{"link-local CIDR", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"169.254.0.0/16"} }, "spec.remote.cidr.external[0]: Invalid value: \"169.254.0.0/16\": 169.254.0.0/16 refused (SpecialUse)"},
		{"default route", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = []netv1beta1.CIDR{"0.0.0.0/0"} }, "spec.remote.cidr.pod[0]: Invalid value: \"0.0.0.0/0\": 0.0.0.0/0 refused (SpecialUse): a default route"},
		{"loopback", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = []netv1beta1.CIDR{"127.0.0.0/8"} }, "spec.remote.cidr.pod[0]: Invalid value: \"127.0.0.0/8\": 127.0.0.0/8 refused (SpecialUse)"},
		{"multicast", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"239.0.0.0/8"} }, "spec.remote.cidr.external[0]: Invalid value: \"239.0.0.0/8\": 239.0.0.0/8 refused (SpecialUse)"},
		{"key name", func(o validObjects) { o.key.Name = "" }, "metadata.name: Required"},
		{"CIDR with a space", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = []netv1beta1.CIDR{"10.244.0.0/16 "} }, "spec.remote.cidr.pod[0]: Invalid value: \"10.244.0.0/16 \""},
		{"too many pod CIDRs", func(o validObjects) { o.conf.Spec.Remote.CIDR.Pod = manyCIDRs(netv1beta1.MaxCIDRs + 1) }, "spec.remote.cidr.pod: Too many: 65: must have at most 64 items"},
		{"too many external CIDRs", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = manyCIDRs(68000) }, "spec.remote.cidr.external: Too many: 68000: must have at most 64 items"},
		{"too many local CIDRs", func(o validObjects) {
			o.conf.Spec.Local = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{Pod: manyCIDRs(65)}}
		}, "spec.local.cidr.pod: Too many"},
		{"too many addresses", func(o validObjects) {
			o.client.Spec.Endpoint.Addresses = nil
			for i := range netv1beta1.MaxEndpointAddresses + 1 {
				o.client.Spec.Endpoint.Addresses = append(o.client.Spec.Endpoint.Addresses, fmt.Sprintf("192.0.2.%d", i+1))
			}
		}, "spec.endpoint.addresses: Too many: 17: must have at most 16 items"},
		{"too many ports", func(o validObjects) { o.server.Spec.Endpoint.Ports = make([]int32, 17) }, "spec.endpoint.ports: Too many: 17: must have at most 16 items"},
		{"client ports agreeing with port", func(o validObjects) { o.client.Spec.Endpoint.Ports = []int32{30851} }, ""},
		{"client ports without port", func(o validObjects) {
			o.client.Spec.Endpoint.Port, o.client.Spec.Endpoint.Ports = 0, []int32{30851}
		}, ""},
		{"client ports not port", func(o validObjects) { o.client.Spec.Endpoint.Ports = []int32{30852} }, "spec.endpoint.port: Invalid value: 30851: must match spec.endpoint.ports[0], 30852"},
		{"client two ports", func(o validObjects) {
			o.client.Spec.Endpoint.Port, o.client.Spec.Endpoint.Ports = 0, []int32{30851, 30852}
		}, "spec.endpoint.ports: Invalid value: [30851,30852]: takes one port"},
		{"client port list out of range", func(o validObjects) {
			o.client.Spec.Endpoint.Port, o.client.Spec.Endpoint.Ports = 0, []int32{70000}
		}, "spec.endpoint.ports[0]: Invalid value: 70000"},
		{"too many client ports", func(o validObjects) { o.client.Spec.Endpoint.Ports = make([]int32, 17) }, "spec.endpoint.ports: Too many: 17: must have at most 16 items"},
		{"most CIDRs", func(o validObjects) { o.conf.Spec.Remote.CIDR.External = manyCIDRs(netv1beta1.MaxCIDRs) }, ""},
		{"loopback name", func(o validObjects) { o.client.Spec.Endpoint.Addresses = []string{"gw.localhost"} }, "spec.endpoint.addresses[0]: Invalid value: \"gw.localhost\": \"gw.localhost\" always names this host"},
		{"hexadecimal address", func(o validObjects) { o.client.Spec.Endpoint.Addresses = []string{"0x7f000001"} }, "spec.endpoint.addresses[0]: Invalid value: \"0x7f000001\""},
		{"next key all zero", func(o validObjects) { o.key.Spec.NextPublicKey = make([]byte, KeyLength) }, "spec.nextPublicKey: Invalid value: \"<all zero>\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := validServer()
			client, err := GatewayClient(GatewayClientOptions{Peer: Peer{RemoteClusterID: "cluster-b"}, Addresses: []string{"172.18.0.3"}, Port: 30851, MTU: 1340})
			if err != nil {
				t.Fatal(err)
			}
			conf, err := Configuration(ConfigurationOptions{Peer: Peer{RemoteClusterID: "cluster-b"},
				PodCIDRs: mustCIDRs(t, "10.244.0.0/16")})
			if err != nil {
				t.Fatal(err)
			}
			key, err := PublicKey(PublicKeyOptions{Peer: Peer{RemoteClusterID: "cluster-b"}, Key: bytes.Repeat([]byte{7}, KeyLength)})
			if err != nil {
				t.Fatal(err)
			}
			tt.mutate(validObjects{server, client, conf, key})
			var msgs []string
			for _, errs := range [][]string{errStrings(Validate(server)), errStrings(Validate(client)), errStrings(Validate(conf)), errStrings(Validate(key))} {
				msgs = append(msgs, errs...)
			}
			checkOneError(t, msgs, tt.want)
		})
	}
}

// manyCIDRs returns n distinct /32s in 10.0.0.0/8.
func manyCIDRs(n int) []netv1beta1.CIDR {
	out := make([]netv1beta1.CIDR, n)
	for i := range out {
		out[i] = netv1beta1.CIDR(fmt.Sprintf("10.%d.%d.%d/32", 100+i>>16, i>>8&255, i&255))
	}
	return out
}

// checkOneError fails unless msgs is empty when want is, and otherwise
// holds exactly one message, containing want.
func checkOneError(t *testing.T, msgs []string, want string) {
	t.Helper()
	if want == "" {
		if len(msgs) > 0 {
			t.Fatalf("want no error, got %q", msgs)
		}
		return
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0], want) {
		t.Fatalf("want one error containing %q, got %q", want, msgs)
	}
}

func errStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func mustCIDRs(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	ps, err := ParseCIDRList(ss...)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestBuildersRefuseInvalidInput(t *testing.T) {
	_, err := GatewayServer(GatewayServerOptions{Peer: Peer{RemoteClusterID: "a"}, ServiceType: corev1.ServiceTypeClusterIP, NodePort: 30000})
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Fields) != 1 || inv.Fields[0].Field != "spec.endpoint.nodePort" {
		t.Fatalf("want an InvalidError on spec.endpoint.nodePort, got %v", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "invalid GatewayServer liqo-tenant-a/a: spec.endpoint.nodePort: Forbidden") {
		t.Fatalf("error %q does not name the object and field", got)
	}
}

func TestParsePublicKey(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", ""},
		{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "public key is all zero"},
		{"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=", "not in canonical form: want BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="},
		{"AAAA", "public key is 3 bytes, want 32"},
		{"not base64", "public key is not base64"},
		{"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", "not in canonical form"},
		{" BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "public key is not base64"},
		{"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc= ", "public key is not base64"},
		{"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc", "public key is not base64"},
		{"BwcHBwcHBwcHBwcHBwcH\nBwcHBwcHBwcHBwcHBwcHBwc=", "not in canonical form"},
	} {
		_, err := ParsePublicKey(tt.in)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ParsePublicKey(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestValidateAddress(t *testing.T) {
	for _, ok := range []string{"192.0.2.10", "10.0.0.1", "gw.example.org", "gateway-1", "2001:db8::1", "10.0.0.1.nip.io",
		"gw-10-0-0-1.sslip.io", "local.example.com", "localhost-gw.example.com", "cafe.example", "0x.example", "gw.local.example.com"} {
		if err := ValidateAddress(ok); err != nil {
			t.Errorf("ValidateAddress(%q) = %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"999.1.1.1":                            "neither an IP address nor a DNS name",
		"1.2.3":                                "neither an IP address nor a DNS name",
		"0.0.0.0":                              "unspecified",
		"127.0.0.1":                            "loopback",
		"::1":                                  "loopback",
		"169.254.169.254":                      "link-local",
		"224.0.0.1":                            "multicast",
		"::":                                   "unspecified",
		"255.255.255.255":                      "broadcast",
		"not an address":                       "neither",
		"Upper.Case":                           "neither",
		"-dash.example":                        "neither",
		"::ffff:127.0.0.1":                     "loopback",
		"fe80::1%eth0":                         "link-local",
		"localhost":                            "always names this host",
		"gw.localhost":                         "always names this host",
		"localhost.localdomain":                "always names this host",
		"printer.local":                        "multicast DNS",
		"kubernetes.default.svc.cluster.local": "this cluster's own Services",
		"0x7f000001":                           "dotted decimal",
		"0x7f.0x1":                             "dotted decimal",
		"127.0x1":                              "dotted decimal",
		"0177.0.0.0x1":                         "dotted decimal",
		"127.0.0.1.nip.io":                     "names the address 127.0.0.1",
		"app.169.254.169.254.nip.io":           "names the address 169.254.169.254",
		"169-254-169-254.sslip.io":             "link-local",
		"metadata-169-254-169-254.sslip.io":    "link-local",
		"0-0-0-0.sslip.io":                     "unspecified",
	} {
		if err := ValidateAddress(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateAddress(%q) = %v, want an error saying %q", bad, err, want)
		}
	}
}

// TestValidateKeyText checks both keys of a PublicKey manifest as written:
// canonical base64 of 32 bytes, never all zero, no space or line break, the
// rule the CRD's pattern enforces on both fields.
func TestValidateKeyText(t *testing.T) {
	const key, next = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg="
	manifest := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.liqo.io/v1beta1", "kind": "PublicKey",
			"metadata": map[string]any{"name": "k"}, "spec": spec,
		}}
	}
	for _, tt := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"both keys", map[string]any{"publicKey": key, "nextPublicKey": next}, ""},
		{"no next key", map[string]any{"publicKey": key}, ""},
		{"a null next key", map[string]any{"publicKey": key, "nextPublicKey": nil}, ""},
		{"next key not canonical", map[string]any{"publicKey": key, "nextPublicKey": "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAh="}, "spec.nextPublicKey: Invalid value"},
		{"next key all zero", map[string]any{"publicKey": key, "nextPublicKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, "spec.nextPublicKey: Invalid value: \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\": public key is all zero"},
		{"next key with a line break", map[string]any{"publicKey": key, "nextPublicKey": next + "\n"}, "spec.nextPublicKey: Invalid value"},
		{"next key short", map[string]any{"publicKey": key, "nextPublicKey": "AAAA"}, "spec.nextPublicKey: Invalid value: \"AAAA\": public key is 3 bytes"},
		{"next key empty", map[string]any{"publicKey": key, "nextPublicKey": ""}, "spec.nextPublicKey: Invalid value"},
		{"next key a number", map[string]any{"publicKey": key, "nextPublicKey": int64(7)}, "spec.nextPublicKey: Invalid value: 7: must be a string"},
		{"key not canonical", map[string]any{"publicKey": "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd="}, "spec.publicKey: Invalid value"},
		{"key with a space", map[string]any{"publicKey": key + " "}, "spec.publicKey: Invalid value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkOneError(t, errStrings(ValidateKeyText(manifest(tt.spec))), tt.want)
		})
	}
}
