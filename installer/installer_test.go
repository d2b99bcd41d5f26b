package installer

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// factsData returns the data of the facts ConfigMap among objs.
func factsData(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), factsConfigMap+"-") {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			return data
		}
	}
	t.Fatalf("no ConfigMap %s among %d objects", factsConfigMap, len(objs))
	return nil
}

// TestObjects builds the embedded bundle: without facts it is the
// repository's bundles/install as kustomize builds it; given facts land in
// the facts ConfigMap, and only they.
func TestObjects(t *testing.T) {
	plain, err := Objects(Facts{})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := kbuild.Build("../bundles/install")
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != len(repo) {
		t.Fatalf("embedded bundle: %d objects, bundles/install: %d", len(plain), len(repo))
	}
	for i := range plain {
		if plain[i].GetKind() != repo[i].GetKind() || plain[i].GetName() != repo[i].GetName() {
			t.Errorf("object %d: %s %s, bundles/install has %s %s", i, plain[i].GetKind(), plain[i].GetName(), repo[i].GetKind(), repo[i].GetName())
		}
	}
	def := factsData(t, plain)
	if def["CLUSTER_ID"] != "" || def["POD_CIDRS"] != "" || def["SERVICE_CIDR"] != "" {
		t.Errorf("facts without flags: %v, want the cluster ID and ranges left to detection", def)
	}

	given, err := Objects(Facts{
		ClusterID:     "cluster-a",
		PodCIDRs:      cidr.MustPrefixes("10.244.0.0/16", "10.245.0.0/16"),
		ServiceCIDR:   netip.MustParsePrefix("10.96.0.0/12"),
		ReservedCIDRs: cidr.MustPrefixes("192.168.10.0/24"),
	})
	if err != nil {
		t.Fatal(err)
	}
	data := factsData(t, given)
	for k, v := range map[string]string{
		"CLUSTER_ID": "cluster-a", "POD_CIDRS": "10.244.0.0/16,10.245.0.0/16",
		"SERVICE_CIDR": "10.96.0.0/12", "RESERVED_CIDRS": "192.168.10.0/24",
	} {
		if data[k] != v {
			t.Errorf("facts %s = %q, want %q", k, data[k], v)
		}
	}
	for k, v := range def {
		if _, set := map[string]bool{"CLUSTER_ID": true, "POD_CIDRS": true, "SERVICE_CIDR": true, "RESERVED_CIDRS": true}[k]; !set && data[k] != v {
			t.Errorf("facts %s = %q changed from the default %q", k, data[k], v)
		}
	}

	for _, bad := range []struct {
		f    Facts
		want string
	}{
		{Facts{ClusterID: "Not_A_Label"}, "--cluster-id"},
		{Facts{PodCIDRs: cidr.MustPrefixes("10.96.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12")}, "--pod-cidr 10.96.0.0/16 overlaps --service-cidr 10.96.0.0/12"},
	} {
		if _, err := Objects(bad.f); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Objects(%+v): %v, want an error with %q", bad.f, err, bad.want)
		}
	}
}

// TestApply applies the bundle to a real API server in one run, CRDs and
// the objects of their kinds' API group alike; a second run changes
// nothing, and a field another manager owns is reported, not taken.
func TestApply(t *testing.T) {
	c := testcluster.Start(t)
	ctx := t.Context()
	// The CLI's own client, whose scheme lacks the apiextensions kinds.
	cli, err := peering.NewClient(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(Facts{ClusterID: "cluster-a"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := peering.Progress{Out: &out, Timeout: time.Minute}
	if err := Apply(ctx, cli, objs, p); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out.String())
	}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, got); err != nil {
			t.Errorf("%s %s/%s not applied: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if !strings.Contains(out.String(), "CustomResourceDefinitions applied") {
		t.Errorf("no progress line for the CRDs:\n%s", out.String())
	}
	if err := Apply(ctx, cli, objs, p); err != nil {
		t.Fatalf("second apply: %v", err)
	}

	// Someone else takes a field the install sets.
	var sa corev1.ServiceAccount
	key := types.NamespacedName{Namespace: Namespace, Name: "peerlink-controller"}
	if err := c.Client.Get(ctx, key, &sa); err != nil {
		t.Fatal(err)
	}
	sa.Labels["app.kubernetes.io/part-of"] = "someone-else"
	sa.ManagedFields = nil
	if err := c.Client.Update(ctx, &sa, client.FieldOwner("other-tool")); err != nil {
		t.Fatal(err)
	}
	err = Apply(ctx, cli, objs, p)
	if err == nil || !strings.Contains(err.Error(), "ServiceAccount peerlink/peerlink-controller") || !strings.Contains(err.Error(), "another manager") {
		t.Errorf("apply over another manager's field: %v, want a conflict naming the object", err)
	}
}
