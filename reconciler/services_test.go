package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/reconciler/services"
	"github.com/peerlink/peerlink/testkit/ctrltest"
)

// importFromB opts namespace demo in to imports and declares peer b, whose
// pod CIDR 10.244.0.0/16 is this cluster's own, and waits until it is
// remapped to 10.0.0.0/16.
func (e *confEnv) importFromB(t *testing.T) {
	t.Helper()
	var demo corev1.Namespace
	if err := e.cluster.Client.Get(t.Context(), types.NamespacedName{Name: "demo"}, &demo); err != nil {
		t.Fatal(err)
	}
	demo.Labels[mcs.ImportNamespaceLabel] = "true"
	if err := e.cluster.Client.Update(t.Context(), &demo); err != nil {
		t.Fatal(err)
	}
	e.create(t, newConf("liqo-tenant-b", "b", "b", []string{"10.244.0.0/16"}))
	e.waitRemapped(t, "liqo-tenant-b", "b", []string{"10.0.0.0/16"})
}

// waitFor polls check until it passes within confWaitTimeout.
func waitFor(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctrltest.Eventually(t, confWaitTimeout, what, check)
}

// peerWeb is the demo/web service as peer b exports it, exported before
// the local one (so it wins conflicts), with one endpoint inside b's
// declared pod range and one outside.
func peerWeb(port int32) mcs.Service {
	return mcs.Service{
		Key:      mcs.Key{Namespace: "demo", Name: "web"},
		Exported: time.Unix(1600000000, 0).UTC(),
		Type:     mcsv1beta1.ClusterSetIP,
		Ports:    []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port}},
		Endpoints: []mcs.EndpointGroup{{
			Ports: []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}},
			Endpoints: []mcs.Endpoint{
				{IP: netip.MustParseAddr("10.244.2.7"), Ready: true},
				{IP: netip.MustParseAddr("192.168.99.1"), Ready: true},
			},
		}},
	}
}

// receive writes the set peer b sent, as b's gateway would.
func receive(t *testing.T, c client.Client, ns string, services ...mcs.Service) {
	t.Helper()
	set := mcs.Set{}
	for _, s := range services {
		set[s.Key] = s
	}
	data, err := mcs.Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mcs.ImportsConfigMap,
			Labels: map[string]string{mcs.ExchangeLabel: mcs.ImportsRole, netv1beta1.RemoteClusterIDLabel: "b"}},
		BinaryData: map[string][]byte{mcs.DataKey: data},
	}
	err = c.Create(t.Context(), cm)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(t.Context(), cm)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// importedEndpoints returns the addresses and readiness of the imported
// EndpointSlices of demo/web from cluster.
func importedEndpoints(ctx context.Context, c client.Client, cluster string) ([]string, error) {
	list, err := importedSlices(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list {
		if s.Labels[discoveryv1.LabelManagedBy] != services.SliceManager || s.Labels[discoveryv1.LabelServiceName] != services.DerivedName(mcs.Key{Namespace: "demo", Name: "web"}) {
			return nil, fmt.Errorf("slice %s labels %v", s.Name, s.Labels)
		}
		for _, e := range s.Endpoints {
			out = append(out, fmt.Sprintf("%s ready=%t", e.Addresses[0], *e.Conditions.Ready))
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkImported returns an error unless read (importedEndpoints or
// importedPorts) finds want in the imported EndpointSlices of demo/web from
// cluster.
func checkImported(ctx context.Context, c client.Client, cluster string, read func(context.Context, client.Client, string) ([]string, error), want ...string) error {
	got, err := read(ctx, c, cluster)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("slices from %s: %v, want %v", cluster, got, want)
	}
	return nil
}

// importedSlices lists the imported EndpointSlices of demo/web from
// cluster.
func importedSlices(ctx context.Context, c client.Client, cluster string) ([]discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	err := c.List(ctx, &list, client.InNamespace("demo"), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: cluster,
	})
	return list.Items, err
}

// importedPorts lists the ports of the imported EndpointSlices of
// demo/web from cluster, as name/protocol/port.
func importedPorts(ctx context.Context, c client.Client, cluster string) ([]string, error) {
	list, err := importedSlices(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no slice of %s", cluster)
	}
	var out []string
	for _, s := range list {
		for _, p := range s.Ports {
			out = append(out, fmt.Sprintf("%s/%s/%d", *p.Name, *p.Protocol, *p.Port))
		}
	}
	slices.Sort(out)
	return out, nil
}

// clusterPropertyCRD installs a ClusterProperty CRD of the shape KEP-2149
// gives it, and waits until it is served.
func clusterPropertyCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name": "clusterproperties." + clusterPropertyGroup,
			// A *.k8s.io group needs the approval the real CRD carries.
			"annotations": map[string]any{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/3084"},
		},
		"spec": map[string]any{
			"group": clusterPropertyGroup,
			"names": map[string]any{"plural": "clusterproperties", "singular": "clusterproperty", "kind": "ClusterProperty", "listKind": "ClusterPropertyList"},
			"scope": "Cluster",
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type": "object", "properties": map[string]any{"value": map[string]any{"type": "string", "minLength": int64(1)}},
					}},
				}},
			}},
		},
	}}
	if err := c.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ClusterProperty CRD", func(ctx context.Context) error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(crd.GroupVersionKind())
		if err := c.Get(ctx, types.NamespacedName{Name: crd.GetName()}, got); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("not established")
	})
}

// TestServicesReconciler runs the Multi-Cluster Services side of the
// controller against a real API server: a local export and what peer b's
// gateway received become one ServiceImport with a derived Service and an
// EndpointSlice per cluster, only in a namespace that opted in, with b's
// endpoints translated into b's remapped range and ready only while b's
// tunnel is up.
func TestServicesReconciler(t *testing.T) {
	e := newConfEnv(t, "peerlink", "demo", "plain", "liqo-tenant-b")
	c := e.cluster.Client
	ctx := t.Context()
	clusterPropertyCRD(t, c)
	// The controller's writes of what imports and exports are made of,
	// counted at its transport.
	writes := &writeCounter{paths: []string{"/serviceimports", "/endpointslices", "/services/derived-",
		"/configmaps/" + mcs.ExportsConfigMap, "/serviceexports"}}
	e.wrap = writes.wrap
	e.run(t)

	waitFor(t, "the cluster ID in ClusterProperty "+clusterIDProperty, func(ctx context.Context) error {
		prop := &unstructured.Unstructured{}
		prop.SetGroupVersionKind(schema.GroupVersionKind{Group: clusterPropertyGroup, Version: "v1alpha1", Kind: "ClusterProperty"})
		if err := c.Get(ctx, types.NamespacedName{Name: clusterIDProperty}, prop); err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedString(prop.Object, "spec", "value"); v != "local" {
			return fmt.Errorf("value %q", v)
		}
		return nil
	})

	e.importFromB(t)

	// The local Service, its endpoints, its export.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	ready, port, name, proto := true, int32(8080), "http", corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "web-local", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.244.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, o := range []client.Object{svc, slice, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	other := peerWeb(80)
	other.Key = mcs.Key{Namespace: "plain", Name: "other"}
	receive(t, c, "liqo-tenant-b", peerWeb(80), other)

	waitFor(t, "the local export is published to b's tenant namespace", func(ctx context.Context) error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, types.NamespacedName{Namespace: "liqo-tenant-b", Name: mcs.ExportsConfigMap}, &cm); err != nil {
			return err
		}
		set, _, err := mcs.Decode(cm.BinaryData[mcs.DataKey], mcs.DefaultLimits, time.Now())
		if err != nil {
			return err
		}
		web, ok := set[mcs.Key{Namespace: "demo", Name: "web"}]
		if !ok || len(web.Endpoints) != 1 || len(web.Endpoints[0].Endpoints) != 2 {
			return fmt.Errorf("published %+v", set)
		}
		return nil
	})
	waitFor(t, "the ServiceExport's conditions", func(ctx context.Context) error {
		var se mcsv1beta1.ServiceExport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &se); err != nil {
			return err
		}
		for typ, status := range map[string]metav1.ConditionStatus{"Valid": "True", "Ready": "True", "Conflict": "False"} {
			if cond := meta.FindStatusCondition(se.Status.Conditions, typ); cond == nil || cond.Status != status {
				return fmt.Errorf("%s: %+v", typ, cond)
			}
		}
		return nil
	})

	// Nothing in a namespace that did not opt in.
	waitFor(t, "the import of demo/web", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		return c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &si)
	})
	var none mcsv1beta1.ServiceImportList
	if err := c.List(ctx, &none, client.InNamespace("plain")); err != nil || len(none.Items) != 0 {
		t.Fatalf("imports in a namespace that did not opt in: %v %v", none.Items, err)
	}

	waitFor(t, "ServiceImport demo/web with both clusters and the derived Service's IP", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &si); err != nil {
			return err
		}
		var clusters []string
		for _, cl := range si.Status.Clusters {
			clusters = append(clusters, cl.Cluster)
		}
		if !slices.Equal(clusters, []string{"b", "local"}) {
			return fmt.Errorf("clusters %v", clusters)
		}
		var derived corev1.Service
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: si.Annotations[services.DerivedServiceAnnotation]}, &derived); err != nil {
			return err
		}
		if len(si.Spec.IPs) == 0 || si.Spec.IPs[0] != derived.Spec.ClusterIP || derived.Spec.Selector != nil {
			return fmt.Errorf("ips %v, derived service %s selector %v", si.Spec.IPs, derived.Spec.ClusterIP, derived.Spec.Selector)
		}
		if si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
			return fmt.Errorf("spec %+v", si.Spec)
		}
		// Only the exported labels, none here.
		if len(si.Labels) != 0 {
			return fmt.Errorf("labels %v, want none (the export has none)", si.Labels)
		}
		return nil
	})
	// A ServiceImport someone else made is not the controller's to remove.
	manual := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "manual"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if err := c.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's endpoint translated, not ready without a tunnel; the one outside b's range dropped", func(ctx context.Context) error {
		if err := checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=false"); err != nil {
			return err
		}
		return checkImported(ctx, c, "local", importedEndpoints, "10.244.1.5 ready=true", "10.244.1.6 ready=true")
	})

	// b's tunnel comes up.
	conn := &netv1beta1.Connection{
		ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-b", Name: "gw-b", Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "b"}},
		Spec:       netv1beta1.ConnectionSpec{Type: netv1beta1.ConnectionTypeClient, GatewayRef: corev1.ObjectReference{Kind: "GatewayClient", Name: "b"}},
	}
	if err := c.Create(ctx, conn); err != nil {
		t.Fatal(err)
	}
	conn.Status.Value = netv1beta1.Connected
	if err := c.Status().Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	// This cluster's own endpoints are ready: calls stay here, b's
	// endpoint stands by, until none here is ready.
	waitFor(t, "b's endpoint standing by with the tunnel up, while the local ones are ready", func(ctx context.Context) error {
		return checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=false")
	})
	setLocalReady := func(ready bool) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(slice), slice); err != nil {
			t.Fatal(err)
		}
		for i := range slice.Endpoints {
			slice.Endpoints[i].Conditions.Ready = &ready
		}
		if err := c.Update(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
	setLocalReady(false)
	waitFor(t, "b's endpoint ready with the tunnel up and no local endpoint ready", func(ctx context.Context) error {
		return checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=true")
	})
	setLocalReady(true)
	waitFor(t, "b's endpoint standing by again", func(ctx context.Context) error {
		return checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=false")
	})
	// The local export turns the preference off: every cluster's ready
	// endpoints take calls.
	var export mcsv1beta1.ServiceExport
	if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &export); err != nil {
		t.Fatal(err)
	}
	export.Annotations = map[string]string{mcs.PreferLocalAnnotation: "false"}
	if err := c.Update(ctx, &export); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's endpoint ready with the tunnel up, the preference off", func(ctx context.Context) error {
		if err := checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=true"); err != nil {
			return err
		}
		return checkImported(ctx, c, "local", importedEndpoints, "10.244.1.5 ready=true", "10.244.1.6 ready=true")
	})

	// Nothing changed, nothing written: a new version of the imports
	// ConfigMap with the same set (so a reconcile) costs no write.
	settled := writes.settle(t)
	var received corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: "liqo-tenant-b", Name: mcs.ImportsConfigMap}, &received); err != nil {
		t.Fatal(err)
	}
	received.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := c.Update(ctx, &received); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := writes.count(); got != settled {
		t.Errorf("%d writes after a reconcile that changed nothing: %v", got-settled, writes.since(settled))
	}

	// An imported slice changed by someone else is made again, though
	// nothing it is made from changed.
	fromB, err := importedSlices(ctx, c, "b")
	if err != nil || len(fromB) != 1 {
		t.Fatalf("slices from b: %v %v", fromB, err)
	}
	notReady := false
	fromB[0].Endpoints[0].Conditions.Ready = &notReady
	if err := c.Update(ctx, &fromB[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's slice, changed by hand, made again", func(ctx context.Context) error {
		return checkImported(ctx, c, "b", importedEndpoints, "10.0.2.7 ready=true")
	})
	settled = writes.settle(t)

	// A new import costs one write of each object it is made of, in the
	// order a caller needs them: slice, derived Service, ServiceImport
	// with its IP, status.
	api := peerWeb(80)
	api.Key = mcs.Key{Namespace: "demo", Name: "api"}
	receive(t, c, "liqo-tenant-b", peerWeb(80), other, api)
	waitFor(t, "demo/api imported with its IP", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "api"}, &si); err != nil {
			return err
		}
		if len(si.Spec.IPs) == 0 || len(si.Status.Clusters) == 0 {
			return fmt.Errorf("ips %v, clusters %v", si.Spec.IPs, si.Status.Clusters)
		}
		return nil
	})
	writes.settle(t)
	var got []string
	for _, w := range writes.since(settled) {
		// "PATCH /apis/.../namespaces/demo/serviceimports/api" is
		// "PATCH serviceimports", its status "PUT serviceimports/status".
		method, path, _ := strings.Cut(w, " ")
		_, tail, _ := strings.Cut(path, "/namespaces/demo/")
		resource, rest, _ := strings.Cut(tail, "/")
		if strings.HasSuffix(rest, "/status") {
			resource += "/status"
		}
		got = append(got, method+" "+resource)
	}
	want := []string{"PATCH endpointslices", "PATCH services", "PATCH serviceimports", "PUT serviceimports/status"}
	if !slices.Equal(got, want) {
		t.Errorf("writes of a new import: %v, want %v (%v)", got, want, writes.since(settled))
	}

	// b's export with another port, seen here before the local export was
	// made: the local export is in conflict, and b's is in effect.
	older := peerWeb(81)
	older.Seen = time.Unix(1600000000, 0).UTC()
	receive(t, c, "liqo-tenant-b", older)
	waitFor(t, "Conflict on the local export", func(ctx context.Context) error {
		var se mcsv1beta1.ServiceExport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &se); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(se.Status.Conditions, "Conflict")
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Reason, "PortConflict") {
			return fmt.Errorf("Conflict: %+v", cond)
		}
		return nil
	})
	// The import's port http is b's 81: the local endpoints, exported
	// under http 80, serve none of the import's ports.
	waitFor(t, "the import's port routed to b's endpoints alone", func(ctx context.Context) error {
		for cluster, want := range map[string][]string{"b": {"http/TCP/8080"}, "local": nil} {
			if err := checkImported(ctx, c, cluster, importedPorts, want...); err != nil {
				return err
			}
		}
		return nil
	})

	// Unexported everywhere: the import and everything of it go.
	if err := c.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "liqo-tenant-b")
	waitFor(t, "the import goes", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &si)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		got, err := importedEndpoints(ctx, c, "b")
		if err != nil || len(got) != 0 {
			return fmt.Errorf("slices left: %v %v", got, err)
		}
		var derived corev1.ServiceList
		if err := c.List(ctx, &derived, client.InNamespace("demo"), client.MatchingLabels{services.ManagedByLabel: services.ManagedBy}); err != nil || len(derived.Items) != 0 {
			return fmt.Errorf("derived services left: %d (%v)", len(derived.Items), err)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(manual), manual); err != nil {
		t.Errorf("the ServiceImport made by hand, after the controller's reconciles: %v", err)
	}
}

// writeCounter counts the writes whose path holds one of paths and that
// the API server took. A write it refused changed nothing: an update from
// a cache that has not seen the controller's previous write yet, which a
// loaded machine makes now and then, is refused as a conflict.
type writeCounter struct {
	paths []string
	mu    sync.Mutex
	seen  []string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode < 300 && req.Method != http.MethodGet &&
			slices.ContainsFunc(w.paths, func(p string) bool { return strings.Contains(req.URL.Path, p) }) {
			w.mu.Lock()
			w.seen = append(w.seen, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
		}
		return resp, err
	})
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func (w *writeCounter) since(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen[n:])
}

// settle waits until no write was counted for a second, and returns the
// count.
func (w *writeCounter) settle(t *testing.T) int {
	t.Helper()
	last := w.count()
	for range 30 {
		time.Sleep(time.Second)
		if n := w.count(); n == last {
			return n
		} else {
			last = n
		}
	}
	t.Fatalf("the controller keeps writing: %v", w.since(max(0, last-10)))
	return 0
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
