package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/peertest"
)

// TestPeering runs the CLI against two real API servers, each with the
// peerlink controller: first the one-command flow (connect, disconnect,
// reset, each twice), then the GitOps bundle flow with two files passed
// between the admins. Cluster a is the client, b the server.
func TestPeering(t *testing.T) {
	a := peertest.Start(t, "cluster-a", "172.18.0.2")
	b := peertest.Start(t, "cluster-b", "172.18.0.3")
	t.Run("info", func(t *testing.T) { testInfo(t, a) })
	t.Run("network", func(t *testing.T) { testNetwork(t, a, b) })
	t.Run("bundle", func(t *testing.T) { testBundleFlow(t, a, b) })
	t.Run("create", func(t *testing.T) { testCreate(t, a) })
}

// testCreate applies objects with create, without -o, for a peer that does
// not exist: what the controller can do it does, and --wait reports what
// it waits for.
func testCreate(t *testing.T, a *peertest.Cluster) {
	kc := []string{"--kubeconfig", a.TC.Kubeconfig}
	out := cli(t, append([]string{"create", "configuration", "--remote-cluster-id", "cluster-z",
		"--pod-cidr", "10.244.0.0/24", "--external-cidr", "10.70.0.0/16", "--wait", "--timeout", "60s"}, kc...)...)
	if !strings.Contains(out, "INFO   Configuration liqo-tenant-cluster-z/cluster-z is ready: Ready=True") {
		t.Errorf("create configuration --wait:\n%s", out)
	}

	// A key whose base64 holds + and /, which the API once refused.
	key := "+/+/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	cli(t, append([]string{"create", "publickey", "--remote-cluster-id", "cluster-z", "--public-key", key}, kc...)...)
	var pk netv1beta1.PublicKey
	a.MustGet(t, "liqo-tenant-cluster-z", "cluster-z", &pk)
	if got := base64.StdEncoding.EncodeToString(pk.Spec.PublicKey); got != key {
		t.Errorf("PublicKey holds %s, want %s", got, key)
	}

	// A client without an endpoint is never Ready: --wait gives up after
	// --timeout and says what it saw.
	stdout, stderr, code := runCLI(t, append([]string{"create", "gatewayclient", "--remote-cluster-id", "cluster-z", "--wait", "--timeout", "3s"}, kc...)...)
	if code != 1 || !strings.Contains(stderr, "timed out after 3s waiting for GatewayClient liqo-tenant-cluster-z/cluster-z to be Ready") ||
		!strings.Contains(stdout, "INFO   GatewayClient liqo-tenant-cluster-z/cluster-z applied") {
		t.Errorf("create gatewayclient --wait: exit %d\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	info := cli(t, append([]string{"info"}, kc...)...)
	if !strings.Contains(info, "cluster-z") {
		t.Errorf("info does not list peer cluster-z:\n%s", info)
	}
}

// cli runs the CLI and fails the test unless it succeeds.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("peerlink %s: exit code %d\nstdout:\n%s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

func testInfo(t *testing.T, a *peertest.Cluster) {
	if got := cli(t, "info", "--kubeconfig", a.TC.Kubeconfig, "--get", "clusterid"); got != "cluster-a\n" {
		t.Errorf("info --get clusterid = %q", got)
	}
	if got := cli(t, "info", "--kubeconfig", a.TC.Kubeconfig, "--get", "network.podCIDRs"); got != "- 10.244.0.0/24\n" {
		t.Errorf("info --get network.podCIDRs = %q", got)
	}
	out := cli(t, "generate", "configuration", "--kubeconfig", a.TC.Kubeconfig)
	// The tenant namespace first, so that kubectl apply -f creates it on
	// the peer.
	want := "apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    pod-security.kubernetes.io/enforce: privileged\n" +
		"    pod-security.kubernetes.io/enforce-version: latest\n  name: liqo-tenant-cluster-a\n---\n" +
		"apiVersion: networking.liqo.io/v1beta1\nkind: Configuration\nmetadata:\n  labels:\n    liqo.io/remote-cluster-id: cluster-a\n" +
		"  name: cluster-a\n  namespace: liqo-tenant-cluster-a\nspec:\n  remote:\n    cidr:\n      external:\n      - 10.70.0.0/16\n      pod:\n      - 10.244.0.0/24\n"
	if out != want {
		t.Errorf("generate configuration:\n%s\nwant:\n%s", out, want)
	}
	_, stderr, code := runCLI(t, "info", "--kubeconfig", a.TC.Kubeconfig, "--get", "network.nothing")
	if code != 1 || !strings.Contains(stderr, `no key "nothing"`) {
		t.Errorf("info --get of a missing key: exit %d, %s", code, stderr)
	}
	testVersion(t, a)
}

// testVersion reads the version the controller publishes, and reports a
// cluster without peerlink after printing the command's own.
func testVersion(t *testing.T, a *peertest.Cluster) {
	var cm corev1.ConfigMap
	a.MustGet(t, templates.InstallNamespace, clusterinfo.Name, &cm)
	published := cm.Data[clusterinfo.KeyControllerVersion]
	setVersion := func(v string) {
		t.Helper()
		cm.Data[clusterinfo.KeyControllerVersion] = v
		if err := a.C.Update(t.Context(), &cm); err != nil {
			t.Fatal(err)
		}
	}
	setVersion("v0.0.0-test")
	defer setVersion(published)
	out := cli(t, "version", "--kubeconfig", a.TC.Kubeconfig)
	if !strings.HasPrefix(out, "Client Version: ") || !strings.HasSuffix(out, "\nController Version: v0.0.0-test\n") {
		t.Errorf("version:\n%s", out)
	}
	if got := cli(t, "version", "--kubeconfig", a.TC.Kubeconfig, "--get", "controllerVersion.version"); got != "v0.0.0-test\n" {
		t.Errorf("version --get controllerVersion.version = %q", got)
	}
	stdout, stderr, code := runCLI(t, "version", "--kubeconfig", a.TC.Kubeconfig, "--peerlink-namespace", "nowhere")
	if code != 1 || !strings.HasPrefix(stdout, "Client Version: ") || !strings.Contains(stderr, "controller version: configmap nowhere/"+clusterinfo.Name) {
		t.Errorf("version without a controller: exit %d\n%s%s", code, stdout, stderr)
	}
}

func testNetwork(t *testing.T, a, b *peertest.Cluster) {
	recA, recB := a.Record(t), b.Record(t)
	flags := []string{"--kubeconfig", a.TC.Kubeconfig, "--remote-kubeconfig", b.TC.Kubeconfig, "--timeout", "60s"}
	connect := append([]string{"network", "connect", "--gw-server-service-type", "NodePort", "--wait"}, flags...)
	out := cli(t, connect...)
	t.Logf("connect:\n%s", out)

	// The steps, in the order the reference prints them.
	lines := []string{
		"INFO   (remote) Configuration of cluster-a applied",
		"INFO   (local) Configuration of cluster-b applied",
		"INFO   (local) Network configuration correctly set up",
		"INFO   (remote) Network configuration correctly set up",
		"INFO   (remote) Gateway server liqo-tenant-cluster-a/cluster-a applied",
		"INFO   (remote) Gateway server correctly set up: endpoint 172.18.0.3:",
		"INFO   (local) Gateway client liqo-tenant-cluster-b/cluster-b applied, connecting to 172.18.0.3:",
		"INFO   (local) Gateway client correctly set up",
		"INFO   (local) Public key of cluster-b's gateway applied",
		"INFO   (remote) Public key of cluster-a's gateway applied",
		"INFO   (local) Connection is established: Connected",
		"INFO   (remote) Connection is established: Connected",
	}
	at := 0
	for _, l := range lines {
		i := strings.Index(out[at:], l)
		if i < 0 {
			t.Fatalf("connect output lacks %q after position %d:\n%s", l, at, out)
		}
		at += i + len(l)
	}

	// Remote cluster b: the server for a, a's network and a's client key.
	nsB := "liqo-tenant-cluster-a"
	var server netv1beta1.GatewayServer
	var confOnB netv1beta1.Configuration
	var keyOnB netv1beta1.PublicKey
	b.MustGet(t, nsB, "cluster-a", &server, &confOnB, &keyOnB)
	for _, obj := range []client.Object{&server, &confOnB, &keyOnB} {
		if id := obj.GetLabels()[netv1beta1.RemoteClusterIDLabel]; id != "cluster-a" {
			t.Errorf("%T on cluster-b labelled %q", obj, id)
		}
	}
	if server.Spec.Endpoint.ServiceType != corev1.ServiceTypeNodePort || server.Status.Endpoint == nil {
		t.Fatalf("GatewayServer: %+v", server)
	}
	if !bytes.Equal(keyOnB.Spec.PublicKey, a.KeySecretPublic(t, "liqo-tenant-cluster-b", "cluster-b")) {
		t.Error("the PublicKey on cluster-b is not cluster-a's client key")
	}
	if got := confOnB.Spec.Remote.CIDR.Pod; !slices.Equal(got, []netv1beta1.CIDR{"10.244.0.0/24"}) {
		t.Errorf("cluster-b's Configuration of cluster-a: pod %v", got)
	}
	if confOnB.Status.Remote == nil || confOnB.Status.Remote.CIDR.Pod[0] == "10.244.0.0/24" {
		t.Errorf("cluster-b did not remap cluster-a's colliding pod CIDR: %+v", confOnB.Status.Remote)
	}

	// Local cluster a: the client of b's server, b's network and b's server key.
	nsA := "liqo-tenant-cluster-b"
	var gwc netv1beta1.GatewayClient
	var keyOnA netv1beta1.PublicKey
	var confOnA netv1beta1.Configuration
	a.MustGet(t, nsA, "cluster-b", &gwc, &keyOnA, &confOnA)
	if ep := gwc.Spec.Endpoint; !slices.Equal(ep.Addresses, server.Status.Endpoint.Addresses) || ep.Port != server.Status.Endpoint.Port {
		t.Errorf("GatewayClient endpoint %v, server's %v", ep, *server.Status.Endpoint)
	}
	if !bytes.Equal(keyOnA.Spec.PublicKey, b.KeySecretPublic(t, nsB, "cluster-a")) {
		t.Error("the PublicKey on cluster-a is not cluster-b's server key")
	}

	// The order of the writes on each cluster: the Configuration is Ready
	// before the gateway is created, and the gateway before the key.
	for _, c := range []struct {
		rec     *peertest.Recorder
		gateway string
	}{{recA, manifests.KindGatewayClient}, {recB, manifests.KindGatewayServer}} {
		conf := c.rec.First(peertest.Added(manifests.KindConfiguration))
		ready := c.rec.First(func(e peertest.Event) bool { return e.Kind == manifests.KindConfiguration && e.Ready })
		gw := c.rec.First(peertest.Added(c.gateway))
		key := c.rec.First(peertest.Added(manifests.KindPublicKey))
		if !(conf >= 0 && conf <= ready && ready < gw && gw < key) {
			t.Errorf("%s side: Configuration created at %d, Ready at %d, gateway at %d, PublicKey at %d: want that order",
				c.gateway, conf, ready, gw, key)
		}
	}

	// generate publickey on a prints what connect handed to b.
	pk := cli(t, "generate", "publickey", "--kubeconfig", a.TC.Kubeconfig, "--gateway-type", "client", "--gateway-name", "cluster-b", "-o", "json")
	if !strings.Contains(pk, `"name": "cluster-a"`) || !strings.Contains(pk, base64.StdEncoding.EncodeToString(keyOnB.Spec.PublicKey)) {
		t.Errorf("generate publickey:\n%s", pk)
	}
	// ...and so it does for a user who may read gateways and the cluster
	// info but no Secret.
	reader := a.KeyReader(t)
	if pk2 := cli(t, "generate", "publickey", "--kubeconfig", reader, "--gateway-type", "client", "--gateway-name", "cluster-b", "-o", "json"); pk2 != pk {
		t.Errorf("generate publickey without the right to read Secrets:\n%s\nwant:\n%s", pk2, pk)
	}
	info := cli(t, "info", "peer", "cluster-b", "--kubeconfig", a.TC.Kubeconfig)
	// The summary's columns widen with its longest label: compare with the
	// spaces collapsed.
	flat := strings.Join(strings.Fields(info), " ")
	for _, want := range []string{"Gateway: client liqo-tenant-cluster-b/cluster-b", "Connection: gw-cluster-b Connected", "Latency: 1.2ms",
		"Path MTU: 1232 (below the configured MTU 1340", "10.244.0.0/24 -> "} {
		if !strings.Contains(flat, want) {
			t.Errorf("info peer lacks %q:\n%s", want, info)
		}
	}

	// Again: nothing to do, nothing changes.
	gen := server.Generation
	cli(t, connect...)
	b.MustGet(t, nsB, "cluster-a", &server)
	if server.Generation != gen {
		t.Errorf("a second connect changed the GatewayServer (generation %d -> %d)", gen, server.Generation)
	}

	// disconnect removes the gateways and keys, keeps the Configurations.
	for range 2 {
		cli(t, append([]string{"network", "disconnect", "--skip-confirm"}, flags...)...)
	}
	a.CheckDisconnected(t, "cluster-b")
	b.CheckDisconnected(t, "cluster-a")

	// reset removes the Configurations and the tenant namespaces.
	for range 2 {
		cli(t, append([]string{"network", "reset", "--skip-confirm"}, flags...)...)
	}
	a.CheckReset(t, "cluster-b")
	b.CheckReset(t, "cluster-a")

	// Without a terminal and without --skip-confirm, nothing is removed.
	_, stderr, code := runCLI(t, append([]string{"network", "reset"}, flags...)...)
	if code != 1 || !strings.Contains(stderr, "--skip-confirm") {
		t.Errorf("reset without confirmation: exit %d, %s", code, stderr)
	}
}

func testBundleFlow(t *testing.T, a, b *peertest.Cluster) {
	dir := t.TempDir()
	bundleA, bundleB := filepath.Join(dir, "a", "peers", "cluster-b"), filepath.Join(dir, "b", "peers", "cluster-a")
	file1, file2 := filepath.Join(dir, "to-cluster-b.yaml"), filepath.Join(dir, "to-cluster-a.yaml")
	apply := func(p *peertest.Cluster, bundle string) {
		t.Helper()
		if _, stderr, err := p.TC.Kubectl("apply", "--server-side", "-k", bundle); err != nil {
			t.Fatalf("kubectl apply -k %s on %s: %v: %s", bundle, p.ID, err, stderr)
		}
	}

	// Client admin.
	cli(t, "bundle", "init", bundleA, "--peer", "cluster-b", "--role", "client")
	cli(t, "lint", bundleA)
	apply(a, bundleA)
	cli(t, "bundle", "export", "--kubeconfig", a.TC.Kubeconfig, "--peer", "cluster-b", "-o", file1, "--timeout", "60s")

	// Server admin.
	cli(t, "bundle", "init", bundleB, "--peer", "cluster-a", "--role", "server", "--service-type", "NodePort", "--node-port", "30851")
	cli(t, "bundle", "add", bundleB, file1)
	cli(t, "lint", bundleB)
	apply(b, bundleB)
	cli(t, "bundle", "export", "--kubeconfig", b.TC.Kubeconfig, "--peer", "cluster-a", "-o", file2, "--timeout", "60s")

	// Client admin again.
	out := cli(t, "bundle", "add", bundleA, file2)
	if !strings.Contains(out, "endpoint set to 172.18.0.3 port 30851") {
		t.Errorf("bundle add did not set the endpoint:\n%s", out)
	}
	cli(t, "lint", bundleA, "--peer-bundle", bundleB)
	apply(a, bundleA)

	// Nothing private travelled.
	for _, f := range []string{file1, file2} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(bytes.ToLower(data), []byte("privatekey")) {
			t.Errorf("%s holds a private key:\n%s", f, data)
		}
	}

	// Both sides have their gateway, the peer's Configuration and key.
	nsA, nsB := "liqo-tenant-cluster-b", "liqo-tenant-cluster-a"
	var gwc netv1beta1.GatewayClient
	var server netv1beta1.GatewayServer
	peertest.Eventually(t, "the server's endpoint", func(ctx context.Context) error {
		if err := b.Get(ctx, nsB, "cluster-a", &server); err != nil {
			return err
		}
		if server.Status.Endpoint == nil {
			return fmt.Errorf("no endpoint yet")
		}
		return nil
	})
	a.MustGet(t, nsA, "cluster-b", &gwc)
	// The port travels in both forms: the server publishes its node port
	// as a list too, and the client it exports carries it.
	if ep := gwc.Spec.Endpoint; !slices.Equal(ep.Addresses, []string{"172.18.0.3"}) || ep.Port != 30851 || !slices.Equal(ep.Ports, []int32{30851}) ||
		server.Status.Endpoint.Port != 30851 {
		t.Errorf("client endpoint %+v, server endpoint %+v", ep, *server.Status.Endpoint)
	}
	for _, c := range []struct {
		p, peer          *peertest.Cluster
		ns, gwNS, gwName string
	}{{a, b, nsA, nsB, "cluster-a"}, {b, a, nsB, nsA, "cluster-b"}} {
		var key netv1beta1.PublicKey
		c.p.MustGet(t, c.ns, c.peer.ID, &key)
		if !bytes.Equal(key.Spec.PublicKey, c.peer.KeySecretPublic(t, c.gwNS, c.gwName)) {
			t.Errorf("cluster %s holds a PublicKey that is not %s's gateway key", c.p.ID, c.peer.ID)
		}
		peertest.Eventually(t, "the Configuration of "+c.peer.ID+" Ready on "+c.p.ID, func(ctx context.Context) error {
			var conf netv1beta1.Configuration
			if err := c.p.Get(ctx, c.ns, c.peer.ID, &conf); err != nil {
				return err
			}
			if ready, state := peering.ConditionState(conf.Generation, conf.Status.CommonStatus); !ready {
				return fmt.Errorf("%s", state)
			}
			return nil
		})
		peertest.Eventually(t, "the Connection on "+c.p.ID, func(ctx context.Context) error {
			var conn netv1beta1.Connection
			if err := c.p.Get(ctx, c.ns, manifests.GatewayObjectName(c.peer.ID), &conn); err != nil {
				return err
			}
			if conn.Status.Value != netv1beta1.Connected {
				return fmt.Errorf("connection %s", conn.Status.Value)
			}
			return nil
		})
	}
}
