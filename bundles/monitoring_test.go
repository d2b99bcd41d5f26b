package bundles

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerlink/peerlink/internal/kbuild"
)

// TestMonitoringBundle builds bundles/monitoring and checks that each of
// its monitors selects pods or a Service that bundles/install (or the
// gateway templates' pods, by their label) has, on a port of that name,
// and that the dashboard's metrics are known.
func TestMonitoringBundle(t *testing.T) {
	objs, err := kbuild.Build("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	install, err := kbuild.Build("install")
	if err != nil {
		t.Fatal(err)
	}
	// The named ports of the pods of bundles/install, by the value of
	// their app.kubernetes.io/name label; the gateways' come from their
	// templates.
	ports := map[string][]string{"peerlink-gateway": {"health", "metrics", "wireguard"}}
	for _, u := range install {
		labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			cps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range cps {
				name, _, _ := unstructured.NestedString(p.(map[string]any), "name")
				ports[labels["app.kubernetes.io/name"]] = append(ports[labels["app.kubernetes.io/name"]], name)
			}
		}
	}
	services := map[string][]string{}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		if u.GetNamespace() != "peerlink" {
			t.Errorf("%s %s in namespace %q, want peerlink", u.GetKind(), u.GetName(), u.GetNamespace())
		}
		if u.GetKind() == "Service" {
			sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
			svcPorts, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
			for _, p := range svcPorts {
				target, _, _ := unstructured.NestedString(p.(map[string]any), "targetPort")
				if !slices.Contains(ports[sel["app.kubernetes.io/name"]], target) {
					t.Errorf("Service %s: targetPort %q is no port of the pods it selects (%v)", u.GetName(), target, sel)
				}
				name, _, _ := unstructured.NestedString(p.(map[string]any), "name")
				services[u.GetLabels()["app.kubernetes.io/name"]] = append(services[u.GetLabels()["app.kubernetes.io/name"]], name)
			}
		}
	}
	for _, u := range objs {
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		var have []string
		var field string
		switch u.GetKind() {
		case "ServiceMonitor":
			have, field = services[sel["app.kubernetes.io/name"]], "endpoints"
		case "PodMonitor":
			have, field = ports[sel["app.kubernetes.io/name"]], "podMetricsEndpoints"
		default:
			continue
		}
		endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", field)
		if len(endpoints) == 0 {
			t.Errorf("%s %s: no %s", u.GetKind(), u.GetName(), field)
		}
		for _, e := range endpoints {
			port, _, _ := unstructured.NestedString(e.(map[string]any), "port")
			if !slices.Contains(have, port) {
				t.Errorf("%s %s: port %q, but what it selects (%v) has ports %v", u.GetKind(), u.GetName(), port, sel, have)
			}
		}
	}
	for kind, want := range map[string]int{"ServiceMonitor": 1, "PodMonitor": 2, "Service": 1, "ConfigMap": 1} {
		if kinds[kind] != want {
			t.Errorf("%d %s objects, want %d", kinds[kind], kind, want)
		}
	}
	metrics, err := DashboardMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"peerlink_gateway_connection_state", "peerlink_gateway_latency_seconds", "peerlink_fabric_syncs_total"} {
		if !slices.Contains(metrics, want) {
			t.Errorf("the dashboard queries %v, not %s", metrics, want)
		}
	}
}
