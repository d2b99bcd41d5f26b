package peering_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/peertest"
)

// open opens one test cluster as a side of a peering, progress into out.
func open(t *testing.T, name string, c *peertest.Cluster, out *bytes.Buffer) *peering.Cluster {
	t.Helper()
	s, err := peering.Open(t.Context(), name, c.TC.Config, templates.InstallNamespace, peering.Progress{Out: out, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pair starts two test clusters, a (the client side) and b (the server
// side), and opens them as the local and the remote side, progress into
// out.
func pair(t *testing.T, out *bytes.Buffer) (a, b *peertest.Cluster, local, remote *peering.Cluster) {
	t.Helper()
	a = peertest.Start(t, "cluster-a", "172.18.0.2")
	b = peertest.Start(t, "cluster-b", "172.18.0.3")
	return a, b, open(t, "local", a, out), open(t, "remote", b, out)
}

// connectOptions peer through a NodePort server at the default port and
// MTU, handing the keys over and waiting until Connected.
var connectOptions = peering.ConnectOptions{
	Server:    manifests.GatewayServerOptions{ServiceType: corev1.ServiceTypeNodePort, Port: netv1beta1.DefaultGatewayPort, MTU: netv1beta1.DefaultMTU},
	ShareKeys: true,
	Wait:      true,
}

// TestPeering drives Connect, Describe, Export, Disconnect and Reset on two
// real API servers with the controller, without the CLI: a is the client
// side, b the server side.
func TestPeering(t *testing.T) {
	var out bytes.Buffer
	a, b, local, remote := pair(t, &out)
	ctx := t.Context()
	if err := peering.Connect(ctx, local, local, peering.ConnectOptions{}); err == nil {
		t.Error("Connect of a cluster with itself succeeded")
	}

	opts := connectOptions
	for range 2 {
		if err := peering.Connect(ctx, local, remote, opts); err != nil {
			t.Fatalf("connect: %v\n%s", err, out.String())
		}
	}
	for _, want := range []string{"INFO   (remote) Gateway server correctly set up", "INFO   (local) Connection is established: Connected"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, out.String())
		}
	}

	// Each side holds the other's key, the one its key Secret holds.
	nsA, nsB := "liqo-tenant-cluster-b", "liqo-tenant-cluster-a"
	var keyOnA, keyOnB netv1beta1.PublicKey
	a.MustGet(t, nsA, "cluster-b", &keyOnA)
	b.MustGet(t, nsB, "cluster-a", &keyOnB)
	if !bytes.Equal(keyOnA.Spec.PublicKey, b.KeySecretPublic(t, nsB, "cluster-a")) || !bytes.Equal(keyOnB.Spec.PublicKey, a.KeySecretPublic(t, nsA, "cluster-b")) {
		t.Error("the PublicKeys are not the gateways' keys")
	}

	// Describe sees the peer from both sides.
	for _, s := range []struct {
		c    *peertest.Cluster
		peer string
		role gatewayrole.Role
	}{{a, "cluster-b", gatewayrole.Client}, {b, "cluster-a", gatewayrole.Server}} {
		d, err := peering.Describe(ctx, s.c.C, templates.InstallNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Peers) != 1 || d.Peers[0].ClusterID != s.peer || d.Peers[0].Network.Gateway == nil || d.Peers[0].Network.Gateway.Role != string(s.role) ||
			d.Peers[0].Connection == nil || d.Peers[0].Connection.Status != string(netv1beta1.Connected) {
			t.Errorf("cluster %s describes its peers as %+v", s.c.ID, d.Peers)
		}
	}

	// Export: what b hands a is b's Configuration, b's server key and the
	// client to use; what a hands b has no client.
	objs, err := peering.Export(ctx, b.C, peering.Progress{Out: &out, Timeout: time.Minute}, templates.InstallNamespace, nsB, "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	if kinds := kindsOf(objs); kinds != "Configuration,PublicKey,GatewayClient" {
		t.Errorf("server export holds %s", kinds)
	}
	objs, err = peering.Export(ctx, a.C, peering.Progress{Out: &out, Timeout: time.Minute}, templates.InstallNamespace, nsA, "cluster-b")
	if err != nil {
		t.Fatal(err)
	}
	if kinds := kindsOf(objs); kinds != "Configuration,PublicKey" {
		t.Errorf("client export holds %s", kinds)
	}
	if _, err := peering.Export(ctx, a.C, peering.Progress{Out: &out, Timeout: time.Minute}, templates.InstallNamespace, nsA, "cluster-x"); err == nil {
		t.Error("export for a peer without a gateway succeeded")
	}

	// Disconnect keeps the Configurations, and revokes the in-band
	// identity; Reset removes them and the tenant namespaces. Both run
	// twice.
	inBand := peering.PeerKubeconfigOptions{Peer: "cluster-b", Server: netip.MustParseAddrPort("10.70.0.1:6443"), Duration: time.Hour}
	if _, _, err := peering.PeerKubeconfig(ctx, local, inBand); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := peering.Disconnect(ctx, local, remote, true); err != nil {
			t.Fatal(err)
		}
	}
	a.CheckDisconnected(t, "cluster-b")
	b.CheckDisconnected(t, "cluster-a")
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		if err := a.Absent(ctx, nsA, peering.PeerAccessName, obj); err != nil {
			t.Errorf("disconnect left the in-band identity: %v", err)
		}
	}

	// Without shared keys, each side waits for the other's key to be
	// applied some other way.
	opts.ShareKeys, opts.Wait = false, false
	if err := peering.Connect(ctx, local, remote, opts); err != nil {
		t.Fatal(err)
	}
	if err := a.Absent(ctx, nsA, "cluster-b", &netv1beta1.PublicKey{}); err != nil {
		t.Errorf("connect without sharing keys applied one: %v", err)
	}

	// Reset deletes the tenant namespace that holds the identity too.
	if _, _, err := peering.PeerKubeconfig(ctx, local, inBand); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := peering.Reset(ctx, local, remote, true); err != nil {
			t.Fatal(err)
		}
	}
	a.CheckReset(t, "cluster-b")
	b.CheckReset(t, "cluster-a")
}

// TestWaitTimesOut checks that a wait gives up after the timeout, naming
// what it waited for and what it saw last.
func TestWaitTimesOut(t *testing.T) {
	var out bytes.Buffer
	p := peering.Progress{Out: &out, Timeout: 1200 * time.Millisecond, TimeoutName: "--timeout"}
	_, err := p.Wait(t.Context(), "the moon", func(context.Context) (bool, string, error) { return false, "still new", nil })
	if err == nil || !strings.Contains(err.Error(), "timed out after 1.2s waiting for the moon (--timeout): last seen: still new") {
		t.Errorf("wait: %v", err)
	}
	if !strings.Contains(out.String(), "INFO   Waiting for the moon: still new") {
		t.Errorf("progress:\n%s", out.String())
	}
	boom := errors.New("boom")
	if _, err := p.Wait(t.Context(), "x", func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Errorf("wait with a failing check: %v", err)
	}
}

func kindsOf(objs []runtime.Object) string {
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	return strings.Join(kinds, ",")
}
