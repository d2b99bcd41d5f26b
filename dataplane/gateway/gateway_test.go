package gateway

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"

	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

func TestRangeMappings(t *testing.T) {
	conf := &netv1beta1.Configuration{
		ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "ns"},
		Spec: netv1beta1.ConfigurationSpec{Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
			Pod:      []netv1beta1.CIDR{"10.244.0.0/16", "10.245.0.0/16"},
			External: []netv1beta1.CIDR{"10.70.0.0/16"},
		}}},
	}
	if got, err := RangeMappings(conf); err != nil || len(got) != 0 {
		t.Errorf("without status: %v, %v; want no ranges yet", got, err)
	}
	conf.Status.Remote = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
		Pod:      []netv1beta1.CIDR{"10.71.0.0/16"},
		External: []netv1beta1.CIDR{"10.72.0.0/16"},
	}}
	got, err := RangeMappings(conf)
	if err != nil {
		t.Fatal(err)
	}
	want := []dataplane.RangeMapping{
		{Real: netip.MustParsePrefix("10.244.0.0/16"), Remapped: netip.MustParsePrefix("10.71.0.0/16")},
		{Real: netip.MustParsePrefix("10.70.0.0/16"), Remapped: netip.MustParsePrefix("10.72.0.0/16")},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("RangeMappings = %v, want %v (the second pod range has no remapped counterpart yet)", got, want)
	}
	conf.Status.Remote.CIDR.External[0] = "10.72.0.1/16"
	if _, err := RangeMappings(conf); err == nil || !strings.Contains(err.Error(), "status.remote.cidr.external[0] of Configuration ns/peer") {
		t.Errorf("host bits in status: %v", err)
	}
}

func TestResolveEndpoint(t *testing.T) {
	ctx := context.Background()
	if ep, err := resolveEndpoint(ctx, []string{"::1", "fd30:0:2::2", "192.0.2.2"}, 51840); err != nil || ep.String() != "[fd30:0:2::2]:51840" {
		t.Errorf("resolveEndpoint = %v, %v; want the first usable address, of either family", ep, err)
	}
	if _, err := resolveEndpoint(ctx, nil, 51840); !resync.IsWaiting(err) {
		t.Errorf("no address: %v, want waiting", err)
	}
	if _, err := resolveEndpoint(ctx, []string{"192.0.2.2"}, 0); !resync.IsWaiting(err) {
		t.Errorf("no port: %v, want waiting", err)
	}
	if _, err := resolveEndpoint(ctx, []string{"192.0.2.2"}, 70000); err == nil || resync.IsWaiting(err) {
		t.Errorf("port 70000: %v, want an error", err)
	}
	// What a peer may not name is skipped, written or resolved: localhost
	// resolves to loopback (from /etc/hosts, no DNS server asked).
	if ep, err := resolveEndpoint(ctx, []string{"127.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "192.0.2.2"}, 51840); err != nil || ep.String() != "192.0.2.2:51840" {
		t.Errorf("resolveEndpoint = %v, %v; want the one address a server may have", ep, err)
	}
	if _, err := resolveEndpoint(ctx, []string{"localhost"}, 51840); err == nil || !strings.Contains(err.Error(), "server address localhost resolves to 127.0.0.1") {
		t.Errorf("localhost: %v, want it refused as loopback", err)
	}
}

// TestRotate checks the order in which a client tries the server's
// addresses after each turn.
func TestRotate(t *testing.T) {
	addrs := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}
	for turn, want := range [][]string{addrs, {"192.0.2.2", "192.0.2.3", "192.0.2.1"}, {"192.0.2.3", "192.0.2.1", "192.0.2.2"}, addrs} {
		if got := rotate(addrs, turn); !slices.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", addrs, turn, got, want)
		}
	}
	if got := rotate([]string{"192.0.2.1"}, 5); !slices.Equal(got, []string{"192.0.2.1"}) {
		t.Errorf("rotate of one address = %v", got)
	}
	if addrs[0] != "192.0.2.1" {
		t.Errorf("rotate changed its input: %v", addrs)
	}
}

func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := readKey(dir, netv1beta1.PrivateKeyField); !resync.IsWaiting(err) {
		t.Errorf("missing key file: %v, want waiting", err)
	}
	if err := os.WriteFile(filepath.Join(dir, netv1beta1.PrivateKeyField), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readKey(dir, netv1beta1.PrivateKeyField); err == nil || resync.IsWaiting(err) || !strings.Contains(err.Error(), "5 bytes") {
		t.Errorf("short key file: %v", err)
	}
}

// TestNextKeys reads the optional next keys: the next private key file of
// the key Secret and spec.nextPublicKey of the peer's PublicKey; a bad one
// is an error naming the file or the object and field.
func TestNextKeys(t *testing.T) {
	dir := t.TempDir()
	current, next := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	currentKey, _ := plan.NewKey(current)
	if k, err := readNextKey(dir, currentKey); err != nil || k != (plan.Key{}) {
		t.Errorf("no next key file: %v, %v; want none and no error", k, err)
	}
	for _, tc := range []struct {
		content []byte
		want    string
	}{{next, ""}, {current, "the same key pair as privateKey"}, {next[:5], "5 bytes"}} {
		if err := os.WriteFile(filepath.Join(dir, netv1beta1.NextPrivateKeyField), tc.content, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := readNextKey(dir, currentKey)
		switch {
		case tc.want == "" && (err != nil || k != plan.Key(next)):
			t.Errorf("next key file: %v, %v; want the key", k, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), netv1beta1.NextPrivateKeyField)):
			t.Errorf("next key file %x: %v, want an error naming the file and %q", tc.content, err, tc.want)
		}
	}

	pk := &netv1beta1.PublicKey{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "tenant"}, Spec: netv1beta1.PublicKeySpec{PublicKey: current}}
	if cur, nxt, err := publicKeys(pk); err != nil || cur != plan.Key(current) || nxt != (plan.Key{}) {
		t.Errorf("publicKeys without a next key = %v, %v, %v", cur, nxt, err)
	}
	pk.Spec.NextPublicKey = next
	if _, nxt, err := publicKeys(pk); err != nil || nxt != plan.Key(next) {
		t.Errorf("publicKeys with a next key = %v, %v", nxt, err)
	}
	for content, want := range map[string]string{string(current): "the same key as spec.publicKey", "short": "5 bytes"} {
		pk.Spec.NextPublicKey = []byte(content)
		if _, _, err := publicKeys(pk); err == nil || !strings.Contains(err.Error(), "spec.nextPublicKey of PublicKey tenant/peer") || !strings.Contains(err.Error(), want) {
			t.Errorf("publicKeys with next key %x: %v, want an error naming the object, the field and %q", content, err, want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{AgentOptions: dataplane.AgentOptions{Namespace: "ns", ResyncInterval: time.Second},
		Name: "n", RemoteClusterID: "r", Role: gatewayrole.Server, ListenPort: 51840, KeyDir: "/k", PingInterval: time.Second, MaxMisses: 5,
		LocalRanges: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.ListenPort, bad.LocalRanges = 0, nil
	err := bad.Validate()
	for _, want := range []string{"ListenPort 0", "LocalRanges: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	bad = ok
	bad.LocalRanges = []netip.Prefix{netip.MustParsePrefix("fd44::1/48")}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "LocalRanges fd44::1/48: must be a network") {
		t.Errorf("Validate() with host bits = %v", err)
	}
	dual := ok
	dual.LocalRanges = append(dual.LocalRanges, netip.MustParsePrefix("fd44::/48"))
	dual.UnknownSource = netip.MustParseAddr("fd44::")
	if err := dual.Validate(); err != nil {
		t.Errorf("Validate() of dual-stack ranges = %v", err)
	}
}

// TestConnectionWriter runs the Connection writer against a real API
// server: the value is written when it changes, a changed latency alone at
// most every ten seconds, a new path MTU and the MTUs both sides announce
// at once with their conditions, and the peer endpoint survives in an
// annotation.
func TestConnectionWriter(t *testing.T) {
	c := tenantCRDClient(t)
	ctx := context.Background()
	gw := &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "tenant",
		Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "peer"}}}
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &connectionWriter{
		c: c, name: "gw-peer", ns: "tenant", clusterID: "peer", role: gatewayrole.Server,
		gatewayRef: func() (string, string) { return "GatewayServer", string(gw.UID) },
		now:        func() time.Time { return now },
	}
	get := func() netv1beta1.Connection {
		t.Helper()
		var conn netv1beta1.Connection
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "gw-peer"}, &conn); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// report has w write r, failing the test on an error.
	report := func(r health.Report) {
		t.Helper()
		if err := w.report(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	report(health.Report{State: health.Connecting})
	conn := get()
	if conn.Spec.Type != netv1beta1.ConnectionTypeServer || conn.Spec.GatewayRef.Name != "peer" || conn.Spec.GatewayRef.UID != gw.UID ||
		len(conn.OwnerReferences) != 1 || conn.OwnerReferences[0].UID != gw.UID || conn.Labels[netv1beta1.RemoteClusterIDLabel] != "peer" {
		t.Errorf("Connection spec %+v, owners %+v, labels %v", conn.Spec, conn.OwnerReferences, conn.Labels)
	}
	if conn.Status.Value != netv1beta1.Connecting {
		t.Errorf("status %+v, want Connecting", conn.Status)
	}

	now = now.Add(2 * time.Second)
	report(health.Report{State: health.Connected, RTT: 1234 * time.Microsecond})
	conn = get()
	if conn.Status.Value != netv1beta1.Connected || conn.Status.Latency.Value != "1.23ms" || !meta(conn, netv1beta1.ConditionReady, metav1.ConditionTrue) {
		t.Errorf("status %+v, want Connected with latency 1.23ms and Ready", conn.Status)
	}
	rv := conn.ResourceVersion

	now = now.Add(2 * time.Second)
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond})
	if got := get(); got.ResourceVersion != rv {
		t.Errorf("a new latency 2s after the last one was written: %+v", got.Status)
	}
	now = now.Add(10 * time.Second)
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond})
	if got := get(); got.Status.Latency.Value != "2ms" {
		t.Errorf("latency after 12s = %q, want 2ms", got.Status.Latency.Value)
	}
	report(health.Report{State: health.Error, RTT: 2 * time.Millisecond, Misses: 5})
	if got := get(); got.Status.Value != netv1beta1.ConnectionError || !meta(got, netv1beta1.ConditionReady, metav1.ConditionFalse) {
		t.Errorf("status %+v, want Error and not Ready", got.Status)
	}

	// A path narrower than the configured MTU is written at once, with
	// its condition, and kept by later reports; a path as wide as the
	// configured MTU turns the condition False.
	now = now.Add(time.Second)
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, PathMTU: 1232, MTU: 1340})
	if got := get(); got.Status.PathMTU != 1232 || !meta(got, netv1beta1.ConditionPathMTUReduced, metav1.ConditionTrue) {
		t.Errorf("status %+v, want path MTU 1232 and PathMTUReduced", got.Status)
	}
	now = now.Add(time.Second)
	report(health.Report{State: health.Error, RTT: 2 * time.Millisecond, Misses: 5})
	if got := get(); got.Status.Value != netv1beta1.ConnectionError || got.Status.PathMTU != 1232 || !meta(got, netv1beta1.ConditionPathMTUReduced, metav1.ConditionTrue) {
		t.Errorf("status %+v, want Error keeping path MTU 1232 and PathMTUReduced", got.Status)
	}
	report(health.Report{State: health.Error, RTT: 2 * time.Millisecond, Misses: 5, PathMTU: 1340, MTU: 1340})
	if got := get(); got.Status.PathMTU != 1340 || !meta(got, netv1beta1.ConditionPathMTUReduced, metav1.ConditionFalse) {
		t.Errorf("status %+v, want path MTU 1340 and PathMTUReduced False", got.Status)
	}

	// The MTUs both sides announce: different ones are written at once,
	// the peer's in status.peerMTU and both in the MTUMismatch condition's
	// message; the same ones turn it False; a peer whose MTU is unknown
	// (one of an earlier release) has neither.
	now = now.Add(time.Second)
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, AnnouncedMTU: 1340, PeerMTU: 1400})
	got := get()
	mismatch := apimeta.FindStatusCondition(got.Status.Conditions, netv1beta1.ConditionMTUMismatch)
	if got.Status.PeerMTU != 1400 || mismatch == nil || mismatch.Status != metav1.ConditionTrue ||
		!strings.Contains(mismatch.Message, "1340") || !strings.Contains(mismatch.Message, "1400") {
		t.Errorf("status %+v, MTUMismatch %+v: want peer MTU 1400 and MTUMismatch True naming 1340 and 1400", got.Status, mismatch)
	}
	if got.Status.PathMTU != 1340 || !meta(got, netv1beta1.ConditionPathMTUReduced, metav1.ConditionFalse) {
		t.Errorf("status %+v: want the path MTU kept", got.Status)
	}
	now = now.Add(time.Second)
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, AnnouncedMTU: 1340, PeerMTU: 1340})
	if got := get(); got.Status.PeerMTU != 1340 || !meta(got, netv1beta1.ConditionMTUMismatch, metav1.ConditionFalse) {
		t.Errorf("status %+v: want peer MTU 1340 and MTUMismatch False", got.Status)
	}
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, AnnouncedMTU: 1340})
	if got := get(); got.Status.PeerMTU != 0 || apimeta.FindStatusCondition(got.Status.Conditions, netv1beta1.ConditionMTUMismatch) != nil {
		t.Errorf("status %+v: want no peer MTU and no MTUMismatch while the peer's MTU is unknown", got.Status)
	}
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, AnnouncedMTU: 1340, PeerMTU: 1280})

	// The key the tunnel runs on is written when it changes, kept by
	// later reports, and read back by a new writer.
	key := plan.Key{7}
	phase := keyRotationPhase{netv1beta1.ReasonPeerNotAccepting, "waiting for the peer"}
	if err := w.reportKey(ctx, key, phase); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(get().Status.Conditions, netv1beta1.ConditionKeyRotation); c == nil || c.Reason != phase.reason || c.Message != phase.message {
		t.Errorf("KeyRotation condition %+v, want reason %s", c, phase.reason)
	}
	// A key's report keeps what the health reports wrote.
	if got := get(); got.Status.PeerMTU != 1280 || !meta(got, netv1beta1.ConditionMTUMismatch, metav1.ConditionTrue) {
		t.Errorf("status %+v: want peer MTU 1280 and MTUMismatch kept by the key's report", got.Status)
	}
	report(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, PathMTU: 1340, MTU: 1340})
	if got := get(); !bytes.Equal(got.Status.PublicKey, key[:]) || got.Status.Value != netv1beta1.Connected {
		t.Errorf("status %+v, want Connected with public key %s", got.Status, key)
	}
	// No rotation under way: no KeyRotation condition.
	if err := w.reportKey(ctx, key, keyRotationPhase{}); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(get().Status.Conditions, netv1beta1.ConditionKeyRotation); c != nil {
		t.Errorf("KeyRotation condition %+v with no rotation under way", c)
	}
	if got, err := (&connectionWriter{c: c, name: "gw-peer", ns: "tenant"}).lastPublicKey(ctx); err != nil || got != key {
		t.Errorf("lastPublicKey of a new writer = %s, %v; want %s", got, err, key)
	}

	ep := netip.MustParseAddrPort("192.0.2.1:40000")
	if err := w.persistEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	next := &connectionWriter{c: c, name: "gw-peer", ns: "tenant"}
	if got, err := next.lastEndpoint(ctx); err != nil || got != ep {
		t.Errorf("lastEndpoint of a new writer = %v, %v; want %v", got, err, ep)
	}
	missing := &connectionWriter{c: c, name: "gw-none", ns: "tenant"}
	if got, err := missing.lastEndpoint(ctx); err != nil || got.IsValid() {
		t.Errorf("lastEndpoint without a Connection = %v, %v", got, err)
	}
}

func meta(conn netv1beta1.Connection, typ string, status metav1.ConditionStatus) bool {
	for _, c := range conn.Status.Conditions {
		if c.Type == typ {
			return c.Status == status
		}
	}
	return false
}

// tenantCRDClient is tenantClient with the API's CRDs installed.
func tenantCRDClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, netv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return tenantClient(t, testcluster.WithScheme(s), testcluster.WithCRDDirs("../../bundles/install/crds"))
}

// tenantClient starts an API server with opts and returns a client of it,
// with the namespace tenant the tests' objects live in.
func tenantClient(t *testing.T, opts ...testcluster.Option) client.Client {
	t.Helper()
	c := testcluster.Start(t, opts...).Client
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMarkActive runs markActive against a real API server: the elected
// replica's pod gets the active label and a deletion cost, a former active
// replica of the same gateway loses both, and a pod of another gateway keeps its own; the
// server's Service without a selector gets the elected pod as its only
// endpoint, one with a selector is left alone.
func TestMarkActive(t *testing.T) {
	c := tenantClient(t)
	ctx := context.Background()
	pod := func(name, gateway string, active bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", Labels: map[string]string{netv1beta1.GatewayNameLabel: gateway}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gateway", Image: "gateway"}}},
		}
		if active {
			p.Labels[netv1beta1.ActiveGatewayLabel] = "true"
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pod("new", "peer", false)
	pod("old", "peer", true)
	pod("other", "another-peer", true)
	// The server's Service selects no pods: the active replica is its
	// endpoint, written over the former one's.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gw-peer", Namespace: "tenant"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{
			Name: "wireguard", Protocol: corev1.ProtocolUDP, Port: 51840, TargetPort: intstr.FromInt32(51840),
		}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	a := &activeMarker{opts: Options{Name: "peer", RemoteClusterID: "peer", Role: gatewayrole.Server, ListenPort: 51840}, election: &Election{Pods: c, PodName: "old"}, log: logr.Discard()}
	a.opts.Namespace = "tenant"
	a.address = netip.MustParseAddr("10.244.1.7")
	if err := a.markActive(ctx); err != nil {
		t.Fatal(err)
	}
	a.election.PodName = "new"
	a.address = netip.MustParseAddr("10.244.2.9")
	if err := a.markActive(ctx); err != nil {
		t.Fatal(err)
	}
	var slice discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "gw-peer"}, &slice); err != nil {
		t.Fatal(err)
	}
	if len(slice.Endpoints) != 1 || !slices.Equal(slice.Endpoints[0].Addresses, []string{"10.244.2.9"}) ||
		slice.Endpoints[0].TargetRef == nil || slice.Endpoints[0].TargetRef.Name != "new" || !ptr.Deref(slice.Endpoints[0].Conditions.Ready, false) {
		t.Errorf("EndpointSlice gw-peer endpoints: %+v, want the new pod's address alone, ready", slice.Endpoints)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != "gw-peer" || len(slice.OwnerReferences) != 1 || slice.OwnerReferences[0].UID != svc.UID {
		t.Errorf("EndpointSlice gw-peer: labels %v, owners %v: want the Service's name label and the Service as owner", slice.Labels, slice.OwnerReferences)
	}
	if len(slice.Ports) != 1 || ptr.Deref(slice.Ports[0].Name, "") != "wireguard" || ptr.Deref(slice.Ports[0].Port, 0) != 51840 {
		t.Errorf("EndpointSlice gw-peer ports: %+v, want wireguard 51840", slice.Ports)
	}
	for name, want := range map[string]string{"new": "true", "old": "", "other": "true"} {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[netv1beta1.ActiveGatewayLabel]; got != want {
			t.Errorf("pod %s: label %s = %q, want %q", name, netv1beta1.ActiveGatewayLabel, got, want)
		}
		// The active pod is the last a scale-down removes; "other" was
		// labelled by hand, without it.
		wantCost := map[string]string{"new": "1"}[name]
		if got := p.Annotations[corev1.PodDeletionCost]; got != wantCost {
			t.Errorf("pod %s: annotation %s = %q, want %q", name, corev1.PodDeletionCost, got, wantCost)
		}
	}
	// A Service that selects pods is the EndpointSlice controller's.
	svc.Spec.Selector = map[string]string{netv1beta1.ActiveGatewayLabel: "true"}
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	a.address = netip.MustParseAddr("10.244.3.3")
	if err := a.markActive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "gw-peer"}, &slice); err != nil {
		t.Fatal(err)
	}
	if got := slice.Endpoints[0].Addresses; !slices.Equal(got, []string{"10.244.2.9"}) {
		t.Errorf("EndpointSlice gw-peer written for a Service with a selector: addresses %v", got)
	}
	// A pod gone meanwhile is no error, for the label it no longer has.
	if err := patchActive(ctx, c, "tenant", "gone", false); err != nil {
		t.Errorf("patchActive of a missing pod: %v", err)
	}
}
