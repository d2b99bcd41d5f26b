package main

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// renderedContainer renders a default gateway template as the controller
// does and returns its gateway container.
func renderedContainer(t *testing.T, tmpl *unstructured.Unstructured, data templates.Data) corev1.Container {
	t.Helper()
	out, err := templates.Render(tmpl, data)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok, err := unstructured.NestedMap(out.Object, "spec", "deployment")
	if err != nil || !ok {
		t.Fatalf("rendered %s has no spec.deployment: %v", out.GetKind(), err)
	}
	var dep struct {
		Spec appsv1.DeploymentSpec `json:"spec"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &dep); err != nil {
		t.Fatal(err)
	}
	return dep.Spec.Template.Spec.Containers[0]
}

// TestGatewayTemplateArgs renders both default templates and parses the
// gateway container's arguments with the gateway command's flags: the
// templates and the agent must agree (contract 1).
func TestGatewayTemplateArgs(t *testing.T) {
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	server := &netv1beta1.GatewayServer{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-b", Namespace: "liqo-tenant-cluster-b", UID: "u-1"},
	}
	server.Spec.Default()
	client := &netv1beta1.GatewayClient{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-a", Namespace: "liqo-tenant-cluster-a", UID: "u-2"},
		Spec: netv1beta1.GatewayClientSpec{Endpoint: netv1beta1.GatewayClientEndpoint{
			Addresses: []string{"192.0.2.1", "gw.example.org"}, Port: 31000,
		}},
	}
	client.Spec.Default()
	emptyClient := client.DeepCopy()
	emptyClient.Spec.Endpoint = netv1beta1.GatewayClientEndpoint{}
	listClient := client.DeepCopy()
	listClient.Spec.Endpoint.Port, listClient.Spec.Endpoint.Ports = 0, []int32{31000}

	for _, tc := range []struct {
		name  string
		tmpl  *unstructured.Unstructured
		data  templates.Data
		check func(t *testing.T, f gatewayFlags)
	}{
		{"server", defaults[0], templates.DataForServer(server, "u-1", "cluster-b", "gw-cluster-b"), func(t *testing.T, f gatewayFlags) {
			if f.mode != string(gatewayrole.Server) || f.listenPort != netv1beta1.DefaultGatewayPort || f.mtu != netv1beta1.DefaultMTU {
				t.Errorf("server flags %+v", f)
			}
		}},
		{"client", defaults[1], templates.DataForClient(client, "u-2", "cluster-a", "gw-cluster-a"), func(t *testing.T, f gatewayFlags) {
			if f.mode != string(gatewayrole.Client) || f.endpointAddresses != "192.0.2.1,gw.example.org" || f.endpointPort != 31000 {
				t.Errorf("client flags %+v", f)
			}
		}},
		{"client with the port in list form", defaults[1], templates.DataForClient(listClient, "u-2", "cluster-a", "gw-cluster-a"), func(t *testing.T, f gatewayFlags) {
			if f.endpointPort != 31000 {
				t.Errorf("client with ports [31000]: --endpoint-port=%d", f.endpointPort)
			}
		}},
		{"client without endpoint", defaults[1], templates.DataForClient(emptyClient, "u-2", "cluster-a", "gw-cluster-a"), func(t *testing.T, f gatewayFlags) {
			if f.endpointAddresses != "" {
				t.Errorf("client without endpoint: --endpoint-address=%q", f.endpointAddresses)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The controller sets it in every gateway pod, beside the
			// template's arguments.
			t.Setenv(netv1beta1.LocalCIDRsEnv, "10.244.0.0/16,10.70.0.0/16")
			t.Setenv(netv1beta1.UnknownSourceEnv, "10.70.0.0")
			c := renderedContainer(t, tc.tmpl, tc.data)
			if len(c.Args) == 0 || c.Args[0] != "gateway" {
				t.Fatalf("container args %q do not run the gateway", c.Args)
			}
			var f gatewayFlags
			fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.addFlags(fs)
			if err := fs.Parse(c.Args[1:]); err != nil {
				t.Fatalf("args %q: %v", c.Args, err)
			}
			opts, err := f.options()
			if err != nil {
				t.Fatalf("args %q: %v", c.Args, err)
			}
			if opts.UnknownSource != netip.MustParseAddr("10.70.0.0") {
				t.Errorf("unknown source %v, want the controller's 10.70.0.0", opts.UnknownSource)
			}
			if opts.Name != tc.data.Name || opts.Namespace != tc.data.Namespace || opts.RemoteClusterID != tc.data.ClusterID ||
				string(opts.GatewayUID) != tc.data.GatewayUID || opts.KeyDir != "/etc/peerlink/keys" {
				t.Errorf("options %+v do not match the template data %+v", opts, tc.data)
			}
			tc.check(t, f)
		})
	}
}

func TestGatewayFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=server"}, "--listen-port 0"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=both"}, `--mode: unknown role "both"`},
		{[]string{"--namespace=y", "--remote-cluster-id=z", "--mode=client"}, "--name: required"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--wireguard-implementation=boringtun"}, "--wireguard-implementation"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--overlay=gre"}, "--overlay"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--node-ip=node-1"}, "--node-ip"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client"}, "--local-cidr: required"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--local-cidr=10.244.0.1/16"}, "--local-cidr: \"10.244.0.1/16\": host bits set"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--local-cidr=fd00::1/64"}, `--local-cidr: "fd00::1/64": host bits set`},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--local-cidr=10.244.0.0/16", "--unknown-source=10.70.0.0"}, "--unknown-source 10.70.0.0: must be an address of LocalRanges"},
		{[]string{"--name=x", "--namespace=y", "--remote-cluster-id=z", "--mode=client", "--local-cidr=10.244.0.0/16", "--unknown-source=ten"}, "--unknown-source"},
	} {
		cmd := newGatewayCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gateway %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
