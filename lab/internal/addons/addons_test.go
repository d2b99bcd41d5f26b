package addons

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

func TestRender(t *testing.T) {
	p := Params{
		Registry:      "172.30.1.1:5000",
		PodCIDR:       netip.MustParsePrefix("10.245.0.0/16"),
		DNSIP:         netip.MustParseAddr("10.97.0.10"),
		ClusterDomain: "cluster.local",
		FlannelRunDir: "/lab/c1/flannel",
	}
	for name, want := range map[string][]string{
		CoreDNS: {"clusterIP: 10.97.0.10", "image: 172.30.1.1:5000/lab/coredns:latest", "kubernetes cluster.local in-addr.arpa"},
		Flannel: {`"Network": "10.245.0.0/16"`, "path: \"/lab/c1/flannel\"", "image: 172.30.1.1:5000/lab/flanneld:latest"},
	} {
		out, err := Render(name, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: no %q in\n%s", name, w, out)
			}
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for n := 0; ; n++ {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if n == 0 || !errors.Is(err, io.EOF) {
					t.Fatalf("%s: object %d: %v", name, n, err)
				}
				break
			}
			if obj.GetKind() == "" || obj.GetName() == "" {
				t.Errorf("%s: object %d has no kind or name: %v", name, n, obj.Object)
			}
		}
	}
	if _, err := Render("weave", p); err == nil {
		t.Error("an unknown add-on rendered")
	}
}
