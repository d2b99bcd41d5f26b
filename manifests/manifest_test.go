package manifests

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
)

func TestMarshalIsDeterministicAndClean(t *testing.T) {
	build := func() []byte {
		conf, err := Configuration(ConfigurationOptions{
			Peer:          Peer{RemoteClusterID: "cluster-b"},
			PodCIDRs:      mustCIDRs(t, "10.244.0.0/16", "10.245.0.0/16"),
			ExternalCIDRs: mustCIDRs(t, "10.70.0.0/16"),
		})
		if err != nil {
			t.Fatal(err)
		}
		client, err := GatewayClient(GatewayClientOptions{Peer: Peer{RemoteClusterID: "cluster-b"}, MTU: 1340})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Marshal(FormatYAML, conf, client)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := build(), build()
	if !bytes.Equal(a, b) {
		t.Fatalf("two builds differ:\n%s\n%s", a, b)
	}
	for _, unwanted := range []string{"creationTimestamp", "status", "{}", "null", "secretRef"} {
		if bytes.Contains(a, []byte(unwanted)) {
			t.Errorf("output holds %q:\n%s", unwanted, a)
		}
	}
	if !bytes.Contains(a, []byte("\n---\n")) {
		t.Errorf("two objects are not two documents:\n%s", a)
	}
}

func TestMarshalJSONList(t *testing.T) {
	out, err := Marshal(FormatJSON, Namespace("a"), Namespace("b"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ParseManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetName() != "b" {
		t.Fatalf("the List did not round-trip: %s", out)
	}
}

func TestParseManifests(t *testing.T) {
	in := "---\n# a comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n"
	objs, err := ParseManifests([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want 2", len(objs))
	}
	if _, err := ParseManifests([]byte("apiVersion: v1\nkind: [\n")); err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Fatalf("want an error naming document 1, got %v", err)
	}
}

func TestDecodeStrict(t *testing.T) {
	objs, err := ParseManifests([]byte(`apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata:
  name: a
spec:
  mtuu: 1340
  endpoint:
    serviceType: NodePort
`))
	if err != nil {
		t.Fatal(err)
	}
	obj, unknown, err := DecodeStrict(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || !strings.Contains(unknown[0].Error(), `unknown field "spec.mtuu"`) {
		t.Fatalf("want the unknown field spec.mtuu, got %v", unknown)
	}
	if obj.(interface{ GetName() string }).GetName() != "a" {
		t.Fatal("the object was not decoded")
	}

	objs[0].SetAPIVersion("networking.liqo.io/v1alpha1")
	if _, _, err := DecodeStrict(objs[0]); err == nil || !strings.Contains(err.Error(), "v1alpha1 is not served") {
		t.Fatalf("want an error about the version, got %v", err)
	}
}

func TestForPeer(t *testing.T) {
	info := clusterinfo.Info{ClusterID: "cluster-a", PodCIDRs: mustCIDRs(t, "10.244.0.0/24"), ExternalCIDR: mustCIDRs(t, "10.70.0.0/16")[0]}
	conf, err := ConfigurationForPeer(info, "")
	if err != nil {
		t.Fatal(err)
	}
	if conf.Name != "cluster-a" || conf.Namespace != "liqo-tenant-cluster-a" || conf.Labels["liqo.io/remote-cluster-id"] != "cluster-a" ||
		len(conf.Spec.Remote.CIDR.Pod) != 1 || conf.Spec.Remote.CIDR.External[0] != "10.70.0.0/16" {
		t.Fatalf("unexpected configuration: %+v", conf)
	}

	pk, err := PublicKeyForPeer("cluster-a", "", bytes.Repeat([]byte{7}, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pk.Spec.PublicKey, bytes.Repeat([]byte{7}, 32)) || pk.Spec.NextPublicKey != nil || pk.Labels["networking.liqo.io/gateway-resource"] != "true" ||
		pk.Name != "cluster-a" || pk.Namespace != "liqo-tenant-cluster-a" {
		t.Fatalf("unexpected public key: %+v", pk)
	}
	// During a key rotation the peer gets the next key too.
	pk, err = PublicKeyForPeer("cluster-a", "", bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{8}, 32))
	if err != nil || !bytes.Equal(pk.Spec.NextPublicKey, bytes.Repeat([]byte{8}, 32)) {
		t.Fatalf("public key with a next key: %+v, %v", pk, err)
	}
	for _, bad := range [][]byte{[]byte("short"), make([]byte, 32)} {
		if _, err := PublicKeyForPeer("cluster-a", "", bad, nil); err == nil || !strings.Contains(err.Error(), "spec.publicKey") {
			t.Errorf("key %x: want an error naming spec.publicKey, got %v", bad, err)
		}
		if _, err := PublicKeyForPeer("cluster-a", "", bytes.Repeat([]byte{7}, 32), bad); err == nil || !strings.Contains(err.Error(), "spec.nextPublicKey") {
			t.Errorf("next key %x: want an error naming spec.nextPublicKey, got %v", bad, err)
		}
	}

	server := validServer()
	if _, err := GatewayClientForPeer("cluster-b", "", server); err == nil {
		t.Fatal("want an error while the endpoint is not published")
	}
	// The client carries the server's published port, in list form too
	// when the server publishes the list: its node port, for a NodePort
	// server.
	udp := corev1.ProtocolUDP
	for _, c := range []struct {
		name      string
		published []int32
	}{{"list", []int32{30851}}, {"port alone", nil}} {
		server.Status.Endpoint = &netv1beta1.EndpointStatus{Addresses: []string{"192.0.2.7"}, Port: 30851, Ports: c.published, Protocol: &udp}
		gwc, err := GatewayClientForPeer("cluster-b", "", server)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ep := gwc.Spec.Endpoint; ep.Port != 30851 || !slices.Equal(ep.Ports, c.published) || !slices.Equal(ep.Addresses, []string{"192.0.2.7"}) {
			t.Errorf("%s: client endpoint %+v, want 192.0.2.7 port 30851 ports %v", c.name, ep, c.published)
		}
	}
}
