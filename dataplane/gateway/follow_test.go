package gateway

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/health"
)

// TestEndpointFollower runs a client's follower against a real API server:
// it follows an announcement that moves the server, not one that only
// reorders its addresses nor one that points at this cluster or its host;
// the followed endpoint is tried first, then the GatewayClient's; a new
// run takes it from the Connection; a GatewayClient naming another
// endpoint, or the server announcing the named one again, ends it.
func TestEndpointFollower(t *testing.T) {
	c := tenantCRDClient(t)
	ctx := context.Background()
	gw := &netv1beta1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "tenant"}}
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	// newFollower starts a run as the agent does: it restores what the
	// last one followed before it applies the Connection.
	newFollower := func() *endpointFollower {
		w := &connectionWriter{c: c, name: "gw-peer", ns: "tenant", clusterID: "peer", role: gatewayrole.Client,
			gatewayRef: func() (string, string) { return "GatewayClient", string(gw.UID) }, now: time.Now}
		f := &endpointFollower{localRanges: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, conn: w, log: testr.New(t)}
		f.restore(ctx)
		if err := w.ensure(ctx); err != nil {
			t.Fatal(err)
		}
		return f
	}
	annotation := func() string {
		t.Helper()
		var conn netv1beta1.Connection
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "gw-peer"}, &conn); err != nil {
			t.Fatal(err)
		}
		return conn.Annotations[netv1beta1.FollowedEndpointAnnotation]
	}
	endpoints := func(f *endpointFollower, spec health.Endpoint, want ...health.Endpoint) {
		t.Helper()
		if got := f.endpoints(spec); !slices.EqualFunc(got, want, health.Endpoint.Equal) {
			t.Fatalf("endpoints(%v) = %v, want %v", spec, got, want)
		}
	}

	spec := health.Endpoint{Addresses: []string{"172.18.0.3", "172.18.0.4"}, Port: 31850}
	f := newFollower()
	if f.announced(spec) {
		t.Fatal("followed an announcement before the GatewayClient was read")
	}
	endpoints(f, spec, spec)
	if f.announced(health.Endpoint{Addresses: []string{"172.18.0.4", "172.18.0.3"}, Port: 31850}) {
		t.Error("followed the named addresses in another order: the active replica moved, the server did not")
	}
	for _, bad := range []health.Endpoint{
		{Addresses: []string{"127.0.0.1"}, Port: 31850},
		{Addresses: []string{"172.18.0.3", "169.254.169.254"}, Port: 31850},
		{Addresses: []string{"10.244.1.7"}, Port: 31850},
	} {
		if f.announced(bad) {
			t.Errorf("followed %v", bad)
		}
	}
	endpoints(f, spec, spec)
	if annotation() != "" {
		t.Fatalf("annotation %q while following nothing", annotation())
	}

	moved := health.Endpoint{Addresses: []string{"172.18.0.3", "172.18.0.4"}, Port: 32011}
	if !f.announced(moved) {
		t.Fatal("did not follow a new node port")
	}
	if f.announced(moved) {
		t.Error("followed the same announcement twice")
	}
	endpoints(f, spec, moved, spec)
	if annotation() == "" {
		t.Fatal("the followed endpoint is not on the Connection")
	}

	// The client's server endpoint: the followed one's addresses first,
	// then the named ones, one per turn.
	r := &factReader{follower: f}
	for turn, want := range []string{"172.18.0.3:32011", "172.18.0.4:32011", "172.18.0.3:31850", "172.18.0.4:31850", "172.18.0.3:32011"} {
		if got, err := r.serverEndpoint(ctx, spec.Addresses, int(spec.Port), turn); err != nil || got.String() != want {
			t.Errorf("turn %d: %v, %v; want %s", turn, got, err, want)
		}
	}

	// A new run follows what the last one did.
	again := newFollower()
	endpoints(again, spec, moved, spec)

	// Back to what the GatewayClient names: nothing is followed.
	if !again.announced(spec) {
		t.Fatal("did not go back to the named endpoint")
	}
	endpoints(again, spec, spec)
	if annotation() != "" {
		t.Errorf("annotation %q after going back", annotation())
	}

	// A GatewayClient that names another endpoint wins over an
	// announcement made while it named the former.
	if !again.announced(moved) {
		t.Fatal("did not follow a new node port")
	}
	exchanged := health.Endpoint{Addresses: []string{"172.18.0.9"}, Port: 31000}
	endpoints(again, exchanged, exchanged)
	if annotation() != "" {
		t.Errorf("annotation %q after the GatewayClient changed", annotation())
	}
}
