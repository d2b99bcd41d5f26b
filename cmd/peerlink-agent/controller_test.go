package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/reconciler"
)

// runControllerArgs runs `peerlink-agent controller` with args and returns
// its error; only invalid flags are given, so it never gets to connecting.
func runControllerArgs(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newControllerCommand()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage = true
	return cmd.Execute()
}

func TestControllerFlagValidation(t *testing.T) {
	valid := []string{"--cluster-id=alpha", "--pod-cidr=10.244.0.0/16", "--service-cidr=10.96.0.0/12"}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{
			name: "pod and external overlap",
			args: []string{"--cluster-id=alpha", "--pod-cidr=10.64.0.0/10", "--service-cidr=10.96.0.0/12", "--external-cidr=10.70.0.0/16"},
			want: []string{"--pod-cidr 10.64.0.0/10", "overlaps", "--external-cidr 10.70.0.0/16"},
		},
		{
			name: "reserved inside service",
			args: append(slices.Clone(valid), "--reserved-cidr=192.168.0.0/24,10.100.0.0/16"),
			want: []string{"--service-cidr 10.96.0.0/12", "--reserved-cidr 10.100.0.0/16"},
		},
		{
			name: "invalid cluster id",
			args: []string{"--cluster-id=Alpha_1", "--pod-cidr=10.244.0.0/16", "--service-cidr=10.96.0.0/12"},
			want: []string{"--cluster-id", "Alpha_1"},
		},
		{
			name: "given ranges overlap, others to detect",
			args: []string{"--pod-cidr=10.70.0.0/16"},
			want: []string{"--pod-cidr 10.70.0.0/16", "overlaps", "--external-cidr 10.70.0.0/16"},
		},
		{
			name: "invalid cidr",
			args: append(slices.Clone(valid), "--internal-cidr=10.80.0.0/33"),
			want: []string{"--internal-cidr", "10.80.0.0/33"},
		},
		{
			name: "host bits",
			args: []string{"--cluster-id=alpha", "--pod-cidr=10.244.1.0/16", "--service-cidr=10.96.0.0/12"},
			want: []string{"--pod-cidr", "host bits set", "10.244.0.0/16"},
		},
		{
			name: "overlapping pools",
			args: append(slices.Clone(valid), "--ipam-pool=10.0.0.0/8,10.1.0.0/16"),
			want: []string{"--ipam-pool", "overlaps"},
		},
		{
			name: "positional argument",
			args: append(slices.Clone(valid), "extra"),
			want: []string{"unknown command"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runControllerArgs(t, tc.args...)
			if err == nil {
				t.Fatalf("controller %v: no error", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("controller %v: error %q does not contain %q", tc.args, err, w)
				}
			}
		})
	}
}

func TestControllerFacts(t *testing.T) {
	var o controllerOptions
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{
		"--cluster-id=alpha", "--pod-cidr=10.244.0.0/16", "--pod-cidr=10.245.0.0/16,10.246.0.0/16",
		"--service-cidr=10.96.0.0/12", "--reserved-cidr=", "--namespace=net",
	}); err != nil {
		t.Fatal(err)
	}
	facts, err := o.facts()
	if err != nil {
		t.Fatalf("facts: %v", err)
	}
	if facts.ClusterID != "alpha" || facts.Namespace != "net" {
		t.Errorf("cluster ID %q, namespace %q", facts.ClusterID, facts.Namespace)
	}
	wantPods := []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16"), netip.MustParsePrefix("10.246.0.0/16"),
	}
	if !slices.Equal(facts.PodCIDRs, wantPods) {
		t.Errorf("pod CIDRs %v, want %v", facts.PodCIDRs, wantPods)
	}
	if facts.ExternalCIDR.String() != "10.70.0.0/16" || facts.InternalCIDR.String() != "10.80.0.0/16" {
		t.Errorf("default external %s and internal %s", facts.ExternalCIDR, facts.InternalCIDR)
	}
	if len(facts.ReservedCIDRs) != 0 || len(facts.Pools) != 0 {
		t.Errorf("reserved %v and pools %v, want none", facts.ReservedCIDRs, facts.Pools)
	}
}

// TestControllerBundleArgs builds bundles/install/controller and runs the
// controller's flag parsing on the Deployment's arguments, with $(VAR)
// expanded from the generated facts ConfigMap as the kubelet would: the
// manifest and the command must agree.
func TestControllerBundleArgs(t *testing.T) {
	objs, err := kbuild.Build("../../bundles/install/controller")
	if err != nil {
		t.Fatal(err)
	}
	var (
		dep appsv1.Deployment
		cm  corev1.ConfigMap
	)
	for _, u := range objs {
		var err error
		switch {
		case u.GetKind() == "Deployment" && u.GetName() == "peerlink-controller":
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep)
		case u.GetKind() == "ConfigMap" && strings.HasPrefix(u.GetName(), "peerlink-facts"):
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if dep.Name == "" || cm.Name == "" {
		t.Fatalf("the bundle lacks the Deployment peerlink-controller or the ConfigMap peerlink-facts")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
		t.Fatalf("container envFrom %+v does not reference the generated ConfigMap %s", c.EnvFrom, cm.Name)
	}
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Fatalf("container args %q do not run the controller", c.Args)
	}

	parse := func(env map[string]string) (reconciler.ClusterFacts, error) {
		t.Helper()
		args := expandArgs(t, c.Args[1:], env)
		var o controllerOptions
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("the Deployment's args %q: %v", args, err)
		}
		if !o.leaderElect {
			t.Error("the Deployment does not elect a leader")
		}
		return o.facts()
	}
	env := map[string]string{"POD_NAMESPACE": "peerlink"}
	for k, v := range cm.Data {
		env[k] = v
	}
	// As installed, the cluster ID and the ranges are left to detection.
	facts, err := parse(env)
	if err != nil {
		t.Fatalf("with the default facts: %v", err)
	}
	if facts.ClusterID != "" || len(facts.PodCIDRs) != 0 || facts.ServiceCIDR.IsValid() || !facts.ExternalCIDR.IsValid() {
		t.Errorf("with the default facts: %+v, want the cluster ID, pod and service CIDRs left to detect", facts)
	}
	env["CLUSTER_ID"], env["POD_CIDRS"], env["SERVICE_CIDR"] = "cluster-1", "10.244.0.0/16", "10.96.0.0/12"
	if facts, err = parse(env); err != nil {
		t.Fatalf("with given facts: %v", err)
	}
	if facts.ClusterID != "cluster-1" || facts.Namespace != "peerlink" || len(facts.PodCIDRs) != 1 ||
		facts.PodCIDRs[0].String() != "10.244.0.0/16" || facts.ServiceCIDR.String() != "10.96.0.0/12" {
		t.Errorf("facts %+v do not match the given ones %v", facts, env)
	}
}
