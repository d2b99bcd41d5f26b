package bundles

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

const tenantNamespace = "liqo-tenant-cluster-b"

// startWithInstallBundle starts a control plane and applies bundles/install,
// built by kustomize, the way `kubectl apply -k` would.
func startWithInstallBundle(t *testing.T) *testcluster.Cluster {
	t.Helper()
	objs, err := kbuild.Build("install")
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, netv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := testcluster.Start(t, testcluster.WithScheme(scheme), testcluster.WithObjects(objs...))
	ns := &corev1.Namespace{}
	ns.Name = tenantNamespace
	if err := c.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	waitForLabelPolicy(t, c)
	return c
}

// waitForLabelPolicy waits until the admission policy that requires the
// remote-cluster-id label is in force: a new policy takes a moment to load.
func waitForLabelPolicy(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	probe := &netv1beta1.PublicKey{}
	probe.Name, probe.Namespace = "policy-probe", tenantNamespace
	probe.Spec.PublicKey = make([]byte, 32)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			err := c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), netv1beta1.RemoteClusterIDLabel), nil
		})
	if err != nil {
		t.Fatalf("the remote-cluster-id admission policy never took effect: %v", err)
	}
}

// fixture is one manifest of testdata/api with the expectations written in
// its leading comments.
type fixture struct {
	name      string
	obj       *unstructured.Unstructured
	want      string // for invalid fixtures: the field the error must name
	subStatus bool   // the invalid part is in status, written through the status subresource
}

func readFixtures(t *testing.T, dir string) []fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "api", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/api/%s: %v", dir, err)
	}
	var out []fixture
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fx := fixture{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), obj: &unstructured.Unstructured{}}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "# want: "); ok {
				fx.want = v
			}
			if line == "# subresource: status" {
				fx.subStatus = true
			}
		}
		if err := yaml.Unmarshal(data, &fx.obj.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fx.obj.SetName(fx.name) // unique names, so fixtures of one kind never collide
		out = append(out, fx)
	}
	return out
}

func TestAPIValidation(t *testing.T) {
	c := startWithInstallBundle(t)
	ctx := context.Background()

	t.Run("valid", func(t *testing.T) {
		for _, fx := range readFixtures(t, "valid") {
			t.Run(fx.name, func(t *testing.T) {
				if err := c.Client.Create(ctx, fx.obj.DeepCopy()); err != nil {
					t.Fatalf("a manifest shaped like the reference was rejected: %v", err)
				}
			})
		}
	})

	// The active gateway pod of an IPv6-only cluster has an IPv6 address.
	t.Run("IPv6 internal endpoint", func(t *testing.T) {
		gw := &netv1beta1.GatewayServer{}
		gw.Name, gw.Namespace = "ipv6-endpoint", tenantNamespace
		gw.Labels = map[string]string{netv1beta1.RemoteClusterIDLabel: "cluster-b"}
		if err := c.Client.Create(ctx, gw); err != nil {
			t.Fatal(err)
		}
		ip, node := netv1beta1.IP("fd44::10"), "node-a"
		gw.Status.InternalEndpoint = &netv1beta1.InternalGatewayEndpoint{IP: &ip, Node: &node}
		if err := c.Client.Status().Update(ctx, gw); err != nil {
			t.Fatalf("status with the IPv6 address of the active pod: %v", err)
		}
	})

	invalid := readFixtures(t, "invalid")
	if len(invalid) < 30 {
		t.Fatalf("only %d malformed manifests under testdata/api/invalid, want at least 30", len(invalid))
	}
	t.Run("invalid", func(t *testing.T) {
		for _, fx := range invalid {
			t.Run(fx.name, func(t *testing.T) {
				if fx.want == "" {
					t.Fatal("fixture has no '# want: <field>' line")
				}
				obj := fx.obj.DeepCopy()
				var err error
				if fx.subStatus {
					status := obj.Object["status"]
					if err := c.Client.Create(ctx, obj); err != nil {
						t.Fatalf("create without status: %v", err)
					}
					obj.Object["status"] = status
					err = c.Client.Status().Update(ctx, obj)
				} else {
					err = c.Client.Create(ctx, obj)
				}
				if err == nil {
					t.Fatalf("accepted, want an error naming %s", fx.want)
				}
				t.Log(err)
				if !strings.Contains(err.Error(), fx.want) {
					t.Fatalf("error does not name %s:\n%v", fx.want, err)
				}
				if fx.subStatus {
					return
				}
				// A rejected manifest changes nothing.
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(obj.GroupVersionKind())
				if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err == nil {
					t.Fatalf("rejected object exists anyway")
				}
			})
		}
	})
}

// column is one printer column as Liqo's CRDs list it.
type column struct {
	name, jsonPath string
	wide           bool
}

// TestPrinterColumns holds the CRDs to Liqo's names: short names, printer
// columns (name, order, JSONPath, wide or not), so that commands, scripts
// and tables written for Liqo read the same here.
func TestPrinterColumns(t *testing.T) {
	// The two gateway kinds show the same columns: their template's, then
	// where the server is reachable.
	gateway := func(templateRef, endpoint string) []column {
		return []column{
			{"Template Kind", ".spec." + templateRef + ".kind", true},
			{"Template Name", ".spec." + templateRef + ".name", false},
			{"Template Namespace", ".spec." + templateRef + ".namespace", true},
			{"IP", endpoint + ".addresses[*]", false},
			{"Port", endpoint + ".port", false},
			{"Protocol", endpoint + ".protocol", true},
			{"MTU", ".spec.mtu", true},
			{"Age", ".metadata.creationTimestamp", false},
		}
	}
	// Kinds without columns show kubectl's own, Name and Age.
	want := map[string][]column{
		"configurations": {
			{"Desired Pod CIDR ", ".spec.remote.cidr.pod", false},
			{"Remapped Pod CIDR", ".status.remote.cidr.pod", false},
			{"Age", ".metadata.creationTimestamp", false},
			{"Desired External CIDR", ".spec.remote.cidr.external", true},
			{"Remapped External CIDR", ".status.remote.cidr.external", true},
			{"ClusterID", `.metadata.labels.liqo\.io/remote-cluster-id`, true},
		},
		"gatewayservers": gateway("serverTemplateRef", ".status.endpoint"),
		"gatewayclients": gateway("clientTemplateRef", ".spec.endpoint"),
		"connections": {
			{"Type", ".spec.type", false},
			{"Status", ".status.value", false},
			{"Age", ".metadata.creationTimestamp", false},
			{"Latency", ".status.latency.value", true},
		},
		"publickeies":              nil,
		"wggatewayservers":         nil,
		"wggatewayclients":         nil,
		"wggatewayservertemplates": nil,
		"wggatewayclienttemplates": nil,
	}
	shortNames := map[string][]string{
		"configurations":           {"conf"},
		"gatewayservers":           {"gws", "gwserver"},
		"gatewayclients":           {"gwc", "gwclient"},
		"connections":              {"conn"},
		"publickeies":              {"pk", "pkies", "pkey"},
		"wggatewayservers":         {"wgs", "wggs"},
		"wggatewayclients":         {"wgc", "wggc"},
		"wggatewayservertemplates": {"wggst", "wgst"},
		"wggatewayclienttemplates": {"wggct", "wgct"},
	}

	c := startWithInstallBundle(t)
	ctx := context.Background()
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.Client.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, crd := range crds.Items {
		if crd.Spec.Group != netv1beta1.GroupVersion.Group {
			continue
		}
		seen++
		plural := crd.Spec.Names.Plural
		if !slices.Contains(crd.Spec.Names.Categories, "liqo") {
			t.Errorf("%s: not in category liqo", plural)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1beta1" {
			t.Errorf("%s: versions %v, want only v1beta1", plural, crd.Spec.Versions)
			continue
		}
		cols, ok := want[plural]
		if !ok {
			t.Errorf("%s: a CRD this test does not know", plural)
			continue
		}
		if !slices.Equal(crd.Spec.Names.ShortNames, shortNames[plural]) {
			t.Errorf("%s: short names %v, want %v", plural, crd.Spec.Names.ShortNames, shortNames[plural])
		}
		var got []column
		for _, pc := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got = append(got, column{pc.Name, pc.JSONPath, pc.Priority > 0})
		}
		if !slices.Equal(got, cols) {
			t.Errorf("%s printer columns:\n got %v\nwant %v", plural, got, cols)
		}
		noStatus := []string{"publickeies", "wggatewayservertemplates", "wggatewayclienttemplates"}
		if hasStatus := crd.Spec.Versions[0].Subresources != nil; hasStatus == slices.Contains(noStatus, plural) {
			t.Errorf("%s: status subresource %v, want %v", plural, hasStatus, !hasStatus)
		}
	}
	if seen != 9 {
		t.Errorf("found %d networking.liqo.io CRDs, want 9", seen)
	}

	// kubectl sees the kinds under their short names and the liqo category.
	for _, fx := range readFixtures(t, "valid") {
		if err := c.Client.Create(ctx, fx.obj.DeepCopy()); err != nil {
			t.Fatalf("%s: %v", fx.name, err)
		}
	}
	out, stderr, err := c.Kubectl("get", "conf,gws,gwc,pk,conn", "-A")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, s := range []string{"DESIRED POD CIDR", "REMAPPED POD CIDR", "TEMPLATE NAME", "configuration.networking.liqo.io/configuration",
		"gatewayserver.networking.liqo.io/gatewayserver-nodeport", "gatewayclient.networking.liqo.io/gatewayclient-with-endpoint",
		"publickey.networking.liqo.io/publickey", "connection.networking.liqo.io/connection", "10.244.0.0/16"} {
		if !strings.Contains(out, s) {
			t.Errorf("kubectl get conf,gws,gwc,pk,conn -A: output lacks %q:\n%s", s, out)
		}
	}
	// The IP column shows what Liqo's does for several addresses, the
	// first, not a JSON array of them all.
	out, stderr, err = c.Kubectl("get", "gwc", "-n", tenantNamespace, "gatewayclient-two-addresses", "--no-headers")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if f := strings.Fields(out); !slices.Contains(f, "172.30.2.2") || strings.ContainsAny(out, `[]"`) {
		t.Errorf("kubectl get gwc: IP column is not the first address:\n%s%s", out, stderr)
	}
	// Every short name of Liqo's works.
	var all []string
	for _, names := range shortNames {
		all = append(all, names...)
	}
	slices.Sort(all)
	for _, name := range all {
		if _, stderr, err := c.Kubectl("get", name, "-A"); err != nil {
			t.Errorf("kubectl get %s: %v\n%s", name, err, stderr)
		}
	}
	out, stderr, err = c.Kubectl("get", "liqo", "-A", "-o", "name")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if n := len(strings.Fields(out)); n < 7 {
		t.Errorf("kubectl get liqo -A listed %d objects, want every kind of the category:\n%s", n, out)
	}
}

// TestRBACRulesSayWhy fails on a rule of the install bundle's RBAC without
// a comment just above it saying why the rule is there.
func TestRBACRulesSayWhy(t *testing.T) {
	files, err := filepath.Glob("install/*/rbac*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no RBAC files found: %v", err)
	}
	rules := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "- apiGroups:") {
				rules++
				if !strings.HasPrefix(prev, "#") {
					t.Errorf("%s:%d: a rule without a comment above it saying why", f, i+1)
				}
			}
			if strings.TrimSpace(line) != "" {
				prev = line
			}
		}
	}
	if rules < 10 {
		t.Errorf("found %d rules: the files are not what this test expects", rules)
	}
}
