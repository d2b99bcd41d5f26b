package main

import (
	"io"
	"strconv"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerlink/peerlink/internal/kbuild"
)

// TestFabricBundleArgs builds bundles/install/fabric and parses the
// DaemonSet's arguments, with $(VAR) expanded from the downward API values
// the kubelet would give, with the fabric command's flags.
func TestFabricBundleArgs(t *testing.T) {
	objs, err := kbuild.Build("../../bundles/install/fabric")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	for _, u := range objs {
		if u.GetKind() == "DaemonSet" && u.GetName() == "peerlink-fabric" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds.Name == "" {
		t.Fatal("the bundle lacks the DaemonSet peerlink-fabric")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("the fabric does not run on the host network")
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) != 1 ||
		c.SecurityContext.Capabilities.Add[0] != "NET_ADMIN" || (c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged) {
		t.Errorf("security context %+v: want NET_ADMIN only, not privileged", c.SecurityContext)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			t.Errorf("env %s is not from the downward API", e.Name)
			continue
		}
		env[e.Name] = map[string]string{"spec.nodeName": "node-1", "status.hostIP": "192.168.1.10", "metadata.namespace": "peerlink"}[e.ValueFrom.FieldRef.FieldPath]
	}
	if len(c.Args) == 0 || c.Args[0] != "fabric" {
		t.Fatalf("container args %q do not run the fabric", c.Args)
	}
	args := expandArgs(t, c.Args[1:], env)
	var f fabricFlags
	fs := pflag.NewFlagSet("fabric", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	opts, err := f.options()
	if err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	if opts.NodeName != "node-1" || opts.NodeIP.String() != "192.168.1.10" || opts.Namespace != "peerlink" || opts.GatewayNamespace != "" {
		t.Errorf("options %+v", opts)
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = ":" + strconv.Itoa(int(p.ContainerPort))
	}
	probe := c.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != "probes" || f.probeAddr != ports["probes"] {
		t.Errorf("readiness probe %+v and ports %+v do not match --health-probe-bind-address=%s", probe, c.Ports, f.probeAddr)
	}
	if f.metricsAddr != ports["metrics"] {
		t.Errorf("ports %+v do not match --metrics-bind-address=%s", c.Ports, f.metricsAddr)
	}
}
