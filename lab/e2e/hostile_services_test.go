package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/store"
)

// controllerMemoryBound is the most resident memory B's controller may
// reach while A's gateway sends it the worst sets it may: under its
// 256 Mi limit, with the room docs/services.md accounts for.
const controllerMemoryBound = 192 << 20

// otherNamespace is a namespace that does not exist in B: services of it
// are checked and counted, and imported nowhere.
const otherNamespace = "elsewhere"

// hostileCase is one session A's hostile gateway opens to B's.
type hostileCase struct {
	name    string
	payload []byte
	// refused is the reason B's gateway must count the connection under,
	// or empty when it is a valid session whose services are taken or
	// rejected one by one.
	refused string
	// stored is how many services B's gateway must store of a valid
	// session's set (-1: more than A's own, as many as fit); rejected,
	// how many it must newly reject, by rule (-1: some).
	stored   int
	rejected map[string]float64
	// check runs while B holds the session's set.
	check func(t *testing.T)
}

// TestHostileServiceExchange is the service exchange's trust boundary on
// real clusters. B exports echo, then A does; then A's gateway turns
// hostile and talks to B's gateway on the exchange's port (TCP 12346,
// from A's own tunnel address, the only one B's gateway answers), while
// A's own agent is kept from reconnecting, with: garbage, an oversized
// frame, 100,000 services, names and labels over their bounds, endpoints
// outside the ranges A declared, 2,000 services of 100 empty endpoint
// groups, a set just under every limit and sets just over each, fields the
// API server would refuse, and a forged export time against B's own
// export. B's gateway ends each bad connection after bounded work, rejects
// what is over a limit or invalid alone and counts it by rule, B's
// controller makes no more objects than the limits allow, its memory stays
// under controllerMemoryBound, B's own export stays in effect, and B keeps
// serving echo.
func TestHostileServiceExchange(t *testing.T) {
	alone(t)
	ctx, l := newPeeredLab(t, 28*time.Minute, "hsvc-a", "hsvc-b")
	a, b := l.Clusters[0], l.Clusters[1]
	ns := labctl.EchoNamespace
	url := fmt.Sprintf("http://echo.%s.svc.%s:%d/", ns, cluster.ClustersetDomain, labctl.EchoPort)
	podsB := echoPods(t, ctx, l, b)
	podsA := echoPods(t, ctx, l, a)

	ctrlMem := &peakMemory{}
	stopCtrl := ctrlMem.sampleController(t, ctx, l, b)
	defer stopCtrl()
	start := time.Now()

	kubectlOut(t, ctx, l, b, "label", "namespace", ns, mcs.ImportNamespaceLabel+"=true")
	// B's export comes first: B's own is the older as B sees them. Its
	// calls spread over both clusters (no preference for B's own
	// endpoints), so that A's endpoints in B's import are ready while the
	// peering serves.
	export(t, ctx, l, b, ns, "echo")
	kubectlOut(t, ctx, l, b, "-n", ns, "annotate", "serviceexport", "echo", mcs.PreferLocalAnnotation+"=false")
	time.Sleep(2 * time.Second)
	export(t, ctx, l, a, ns, "echo")
	serving := func() error {
		if n := readyEndpoints(t, ctx, b, ns, mcsv1beta1.LabelServiceName+"=echo,"+mcsv1beta1.LabelSourceCluster+"="+a.ClusterID); n == 0 {
			return errors.New("no ready endpoint of A's echo in B")
		}
		if _, err := l.EchoGet(ctx, b, podsB[0].Name, url); err != nil {
			return err
		}
		if got := kubectlOut(t, ctx, l, b, "get", "serviceimports", "-n", ns, "-o", "name"); got != "serviceimport.multicluster.x-k8s.io/echo" {
			return fmt.Errorf("B's imports: %.200q, want only echo", got)
		}
		return nil
	}
	eventually(t, ctx, "B calls echo by its clusterset name, A's endpoints imported", serving)
	baseline := ctrlMem.peak()

	// What A's gateway really sends: the good set, resent around the bad
	// services so that a hostile set that is delivered keeps it.
	good := exportedSet(t, ctx, l, a, b.ClusterID)
	gw := gatewayAgent(t, ctx, l, a, b.ClusterID)
	// A is the client of the peering: B's gateway listens.
	from := dataplane.TunnelAddress(gatewayrole.Client)
	to := netip.AddrPortFrom(dataplane.TunnelAddress(gatewayrole.Server), dataplane.ServicesPort)
	// Addresses in A's pod range, for endpoints that pass as A's.
	podRange := netip.PrefixFrom(good[0].Endpoints[0].Endpoints[0].IP, 16).Masked()
	goodCost := mcs.Cost{}
	for _, s := range good {
		c := mcs.CostOf(&s, 0)
		goodCost = mcs.Cost{Services: goodCost.Services + c.Services, Endpoints: goodCost.Endpoints + c.Endpoints,
			EndpointGroups: goodCost.EndpointGroups + c.EndpointGroups, MetadataBytes: goodCost.MetadataBytes + c.MetadataBytes}
	}
	limits := mcs.DefaultLimits

	hello := frame(t, map[string]any{"type": "hello", "version": mcs.Version, "batches": true})
	synced := frame(t, map[string]any{"type": "synced"})
	upserts := func(services ...mcs.Service) []byte {
		var out []byte
		for _, s := range services {
			out = append(out, frame(t, map[string]any{"type": "upsert", "service": s})...)
		}
		return out
	}
	// session is a valid session sending the good set and more.
	session := func(more ...mcs.Service) []byte {
		all := append(slices.Clone(good), more...)
		slices.SortFunc(all, func(x, y mcs.Service) int { return x.Key.Compare(y.Key) })
		return append(append(cloneBytes(hello), upserts(all...)...), synced...)
	}
	// svc is a valid service of A in namespace in, with no endpoints.
	svc := func(in, name string) mcs.Service {
		s := good[0]
		s.Key = mcs.Key{Namespace: in, Name: name}
		s.Labels, s.Annotations, s.Endpoints = nil, nil, nil
		return s
	}
	// endpoints are n of A's addresses, in one group.
	endpoints := func(n int) mcs.EndpointGroup {
		g := mcs.EndpointGroup{Ports: good[0].Endpoints[0].Ports}
		base := podRange.Addr().As4()
		for i := range n {
			base[2], base[3] = byte(200+i>>8), byte(i)
			g.Endpoints = append(g.Endpoints, mcs.Endpoint{IP: netip.AddrFrom4(base), Ready: true})
		}
		return g
	}
	// fill returns services of in named <prefix>NNNN sharing total among
	// them, at most each per service, made by make(name, share).
	fill := func(in, prefix string, total, each int, make func(s *mcs.Service, share int)) []mcs.Service {
		var out []mcs.Service
		for i := 0; total > 0; i++ {
			share := min(each, total)
			s := svc(in, fmt.Sprintf("%s%04d", prefix, i))
			make(&s, share)
			out = append(out, s)
			total -= share
		}
		return out
	}
	emptyGroups := func(s *mcs.Service, n int) { s.Endpoints = make([]mcs.EndpointGroup, n) }
	manyEndpoints := func(s *mcs.Service, n int) { s.Endpoints = []mcs.EndpointGroup{endpoints(n)} }
	metadata := func(s *mcs.Service, n int) { s.Annotations = map[string]string{"a": strings.Repeat("x", n-1)} }

	flood := bytes.NewBuffer(cloneBytes(hello))
	for i := range 100_000 {
		s := good[0]
		s.Name = fmt.Sprintf("flood-%06d", i)
		flood.Write(upserts(s))
	}
	flood.Write(synced)
	longName, bigLabels := good[0], good[0]
	longName.Name = strings.Repeat("x", 300)
	bigLabels.Name = "big-labels"
	bigLabels.Labels = map[string]string{}
	for i := range 2000 {
		bigLabels.Labels[fmt.Sprintf("l%04d", i)] = strings.Repeat("v", 60)
	}
	outside := good[0]
	outside.Name = "outside"
	outside.Endpoints = []mcs.EndpointGroup{{Ports: good[0].Ports, Endpoints: []mcs.Endpoint{
		{IP: netip.MustParseAddr("8.8.8.8"), Ready: true},
		{IP: netip.MustParseAddr("169.254.169.254"), Ready: true},
		{IP: b.NodeIP(), Ready: true},
	}}}

	// 2,000 services of 100 empty groups each: 200,000 EndpointSlices
	// unbounded; the first by key up to the total of groups, and no more.
	emptyFlood := fill(ns, "empty-", 2000*100, 100, emptyGroups)
	emptyTaken := (limits.TotalEndpointGroups - goodCost.EndpointGroups) / 100

	// Just under every limit at once, in B's import namespace: the most
	// services, endpoint groups, endpoints and labels and annotations a
	// peer may hold there.
	var under []mcs.Service
	under = append(under, fill(ns, "under-groups-", limits.TotalEndpointGroups-goodCost.EndpointGroups-20, 100, emptyGroups)...)
	under = append(under, fill(ns, "under-endpoints-", limits.TotalEndpoints-goodCost.Endpoints, 1000, manyEndpoints)...)
	under = append(under, fill(ns, "under-metadata-", limits.TotalMetadataBytes-goodCost.MetadataBytes, limits.MetadataBytes, metadata)...)
	// The rest of the services headless: no ClusterIP to allocate, which
	// the API server does one at a time, so that the lab takes minutes,
	// not tens of them.
	for i := len(under) + len(good); i < limits.Services; i++ {
		s := svc(ns, fmt.Sprintf("under-services-%04d", i))
		s.Type = mcsv1beta1.Headless
		under = append(under, s)
	}

	// Just over each total, one limit at a time, in a namespace B does
	// not have: the last service by key is rejected for that total.
	overServices := fill(otherNamespace, "s-", limits.Services-len(good)+1, 1, func(*mcs.Service, int) {})
	overGroups := append(fill(otherNamespace, "g-", limits.TotalEndpointGroups-goodCost.EndpointGroups, 100, emptyGroups),
		func() mcs.Service { s := svc(otherNamespace, "zz-over"); emptyGroups(&s, 1); return s }())
	overEndpoints := append(fill(otherNamespace, "e-", limits.TotalEndpoints-goodCost.Endpoints, 1000, manyEndpoints),
		func() mcs.Service { s := svc(otherNamespace, "zz-over"); manyEndpoints(&s, 1); return s }())
	overMetadata := append(fill(otherNamespace, "m-", limits.TotalMetadataBytes-goodCost.MetadataBytes, limits.MetadataBytes, metadata),
		func() mcs.Service { s := svc(otherNamespace, "zz-over"); metadata(&s, 1); return s }())
	// Past the decompressed bound: ports with long application protocols.
	var overDocument []mcs.Service
	for i := range 400 {
		s := svc(otherNamespace, fmt.Sprintf("d-%04d", i))
		s.Ports = nil
		for p := range 100 {
			s.Ports = append(s.Ports, mcs.Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1000 + p),
				AppProtocol: ptr.To("example.com/" + strings.Repeat("a", 60))})
		}
		overDocument = append(overDocument, s)
	}
	// More than a ConfigMap holds compressed, within every limit:
	// application protocols that do not compress.
	var overEncoded []mcs.Service
	for i := range 1000 {
		s := svc(otherNamespace, fmt.Sprintf("c-%04d", i))
		s.Ports = nil
		for p := range 25 {
			n := uint64(i*25 + p)
			s.Ports = append(s.Ports, mcs.Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1000 + p),
				AppProtocol: ptr.To("x" + noise(n)[:40] + ".example/" + noise(n+1<<40))})
		}
		overEncoded = append(overEncoded, s)
	}

	// One service at and one past each limit of a service, and one per
	// field the API server would refuse, in B's import namespace.
	perService := []mcs.Service{
		func() mcs.Service { s := svc(ns, "at-endpoints"); manyEndpoints(&s, limits.Endpoints); return s }(),
		func() mcs.Service {
			s := svc(ns, "over-endpoints")
			s.Endpoints = []mcs.EndpointGroup{endpoints(limits.Endpoints / 2), endpoints(limits.Endpoints/2 + 1)}
			return s
		}(),
		func() mcs.Service { s := svc(ns, "at-groups"); emptyGroups(&s, limits.EndpointGroups); return s }(),
		func() mcs.Service { s := svc(ns, "over-groups"); emptyGroups(&s, limits.EndpointGroups+1); return s }(),
		func() mcs.Service { s := svc(ns, "at-metadata"); metadata(&s, limits.MetadataBytes); return s }(),
		func() mcs.Service { s := svc(ns, "over-metadata"); metadata(&s, limits.MetadataBytes+1); return s }(),
		func() mcs.Service {
			s := svc(ns, "bad-app-protocol")
			s.Ports = []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, AppProtocol: ptr.To("not a protocol")}}
			return s
		}(),
		func() mcs.Service {
			s := svc(ns, "bad-traffic-distribution")
			s.TrafficDistribution = ptr.To("Anywhere")
			return s
		}(),
		func() mcs.Service {
			s := svc(ns, "bad-internal-traffic-policy")
			s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicy("Nearby"))
			return s
		}(),
		func() mcs.Service {
			s := svc(ns, "bad-session-affinity-config")
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(0))}}
			return s
		}(),
		func() mcs.Service {
			s := svc(ns, "bad-ip-families")
			s.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
			return s
		}(),
		func() mcs.Service {
			s := svc(ns, "bad-exported")
			s.Exported = time.Now().Add(30 * 24 * time.Hour)
			return s
		}(),
	}

	// A's echo again, claiming an export time older than anything and
	// another type and port: B's own export stays in effect.
	forged := good
	for i := range forged {
		if forged[i].Key == (mcs.Key{Namespace: ns, Name: "echo"}) {
			f := forged[i]
			f.Exported = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC)
			f.Type = mcsv1beta1.Headless
			f.Ports = []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 9999}}
			forged = slices.Clone(good)
			forged[i] = f
		}
	}

	slicesFromA := func() int {
		out := kubectlOut(t, ctx, l, b, "get", "endpointslices", "-n", ns, "-l", mcsv1beta1.LabelSourceCluster+"="+a.ClusterID, "-o", "name")
		return len(strings.Fields(out))
	}
	importsIn := func() int {
		return len(strings.Fields(kubectlOut(t, ctx, l, b, "get", "serviceimports", "-n", ns, "-o", "name")))
	}
	// objectsMade waits for B's controller to make the imports and the
	// EndpointSlices of a set, and says how long it took.
	objectsMade := func(t *testing.T, imports, slicesA int) {
		t.Helper()
		began := time.Now()
		waitFor(t, ctx, 8*time.Minute, fmt.Sprintf("%d imports and %d EndpointSlices from A in B", imports, slicesA), func() error {
			if n, m := importsIn(), slicesFromA(); n != imports || m != slicesA {
				return fmt.Errorf("%d imports, %d slices from A", n, m)
			}
			return nil
		})
		t.Logf("B's controller made %d imports and %d EndpointSlices from A in %v; its resident memory at most %.0f MiB so far",
			imports, slicesA, time.Since(began).Round(time.Second), ctrlMem.peak()/(1<<20))
	}

	cases := []hostileCase{
		{name: "garbage", payload: []byte("GET / HTTP/1.1\r\nHost: peerlink\r\n\r\n"), refused: "too-large"},
		{name: "not the protocol", payload: append(cloneBytes(hello), frame(t, map[string]any{"type": "exec", "command": "rm -rf /"})...), refused: "malformed"},
		{name: "oversized frame", payload: append(append(cloneBytes(hello), binary.BigEndian.AppendUint32(nil, 2<<20)...), bytes.Repeat([]byte("x"), 2<<20)...), refused: "too-large"},
		{name: "100,000 services", payload: flood.Bytes(), refused: "too-large"},
		{name: "names and labels over their bounds", payload: session(longName, bigLabels), stored: len(good),
			rejected: map[string]float64{mcs.RuleInvalid: 1, mcs.RuleMetadataBytes: 1}},
		{name: "endpoints outside the declared ranges", payload: session(outside), stored: len(good) + 1, check: func(t *testing.T) {
			eventually(t, ctx, "an EndpointsOutsideRanges event in B", func() error {
				out := kubectlOut(t, ctx, l, b, "get", "events", "-n", manifests.TenantNamespace(a.ClusterID),
					"--field-selector", "reason=EndpointsOutsideRanges", "-o", "jsonpath={.items[*].message}")
				if !strings.Contains(out, ns+"/outside") {
					return fmt.Errorf("events: %q", out)
				}
				return nil
			})
		}},
		{name: "2,000 services of 100 empty groups", payload: session(emptyFlood...), stored: len(good) + emptyTaken,
			rejected: map[string]float64{mcs.RuleTotalEndpointGroups: float64(len(emptyFlood) - emptyTaken)}, check: func(t *testing.T) {
				objectsMade(t, 1+emptyTaken, goodCost.EndpointGroups+emptyTaken*100)
			}},
		{name: "just under every limit", payload: session(under...), stored: len(good) + len(under), check: func(t *testing.T) {
			groups := goodCost.EndpointGroups
			for _, s := range under {
				groups += len(s.Endpoints)
			}
			objectsMade(t, limits.Services, groups)
		}},
		{name: "just over the limit of services", payload: session(overServices...), stored: limits.Services,
			rejected: map[string]float64{mcs.RuleServices: 1}},
		{name: "just over the limit of endpoint groups", payload: session(overGroups...), stored: len(good) + len(overGroups) - 1,
			rejected: map[string]float64{mcs.RuleTotalEndpointGroups: 1}},
		{name: "just over the limit of endpoints", payload: session(overEndpoints...), stored: len(good) + len(overEndpoints) - 1,
			rejected: map[string]float64{mcs.RuleTotalEndpoints: 1}},
		{name: "just over the limit of labels and annotations", payload: session(overMetadata...), stored: len(good) + len(overMetadata) - 1,
			rejected: map[string]float64{mcs.RuleTotalMetadataBytes: 1}},
		{name: "over the decompressed bound", payload: session(overDocument...), stored: -1,
			rejected: map[string]float64{mcs.RuleDocumentBytes: -1}},
		{name: "more than a ConfigMap holds, within every limit", payload: session(overEncoded...), stored: len(good) + len(overEncoded),
			rejected: map[string]float64{mcs.RuleEncodedBytes: 0, mcs.RuleDocumentBytes: 0}, check: func(t *testing.T) {
				// Stored in shards, none over what a ConfigMap holds.
				shards := storedShards(t, ctx, l, b, a.ClusterID)
				total := 0
				for _, sh := range shards {
					total += len(sh.Data)
				}
				t.Logf("B's gateway stores the set in %d shards, %d bytes compressed", len(shards), total)
				if len(shards) < 2 || total <= 1<<20 {
					t.Errorf("%d shards of %d bytes, want more than 1 MiB in several", len(shards), total)
				}
			}},
		{name: "each limit of a service, and fields the API server refuses", payload: session(perService...), stored: len(good) + 3,
			rejected: map[string]float64{mcs.RuleEndpoints: 1, mcs.RuleEndpointGroups: 1, mcs.RuleMetadataBytes: 1, mcs.RuleInvalid: 6},
			check: func(t *testing.T) {
				objectsMade(t, 4, goodCost.EndpointGroups+1+limits.EndpointGroups)
			}},
		{name: "a forged export time against B's own export", payload: append(append(cloneBytes(hello), upserts(forged...)...), synced...),
			stored: len(good), check: func(t *testing.T) {
				eventually(t, ctx, "B's export in conflict, in effect", func() error {
					var se mcsv1beta1.ServiceExport
					c, err := l.Client(b)
					if err != nil {
						return err
					}
					if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, &se); err != nil {
						return err
					}
					var conflict *metav1.Condition
					for i := range se.Status.Conditions {
						if se.Status.Conditions[i].Type == string(mcsv1beta1.ServiceExportConditionConflict) {
							conflict = &se.Status.Conditions[i]
						}
					}
					if conflict == nil || conflict.Status != metav1.ConditionTrue || !strings.Contains(conflict.Reason, "TypeConflict") ||
						!strings.Contains(conflict.Message, "this cluster's export is in effect") {
						return fmt.Errorf("Conflict: %+v", conflict)
					}
					out := kubectlOut(t, ctx, l, b, "get", "events", "-n", ns, "--field-selector", "reason=Conflict,involvedObject.kind=ServiceExport",
						"-o", "jsonpath={.items[*].message}")
					if !strings.Contains(out, "TypeConflict") {
						return fmt.Errorf("no Conflict event on B's export: %q", out)
					}
					si := kubectlOut(t, ctx, l, b, "get", "serviceimport", "-n", ns, "echo", "-o", "jsonpath={.spec.type} {.spec.ports[*].port}")
					if want := fmt.Sprintf("%s %d", mcsv1beta1.ClusterSetIP, labctl.EchoPort); si != want {
						return fmt.Errorf("B's import %q, want %q", si, want)
					}
					return nil
				})
				// B's calls by the clusterset name reach B's own pods only:
				// A's endpoints are not routed on a port A lost.
				eventually(t, ctx, "B's clusterset calls answered by B's pods", func() error {
					for range 10 {
						got, err := l.EchoGet(ctx, b, podsB[0].Name, url)
						if err != nil {
							return err
						}
						if slices.ContainsFunc(podsA, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }) {
							return fmt.Errorf("answered by %s, a pod of A", got.Reply.Pod)
						}
					}
					return nil
				})
			}},
	}
	// The attacker's connections come from ports the kernel never picks
	// for the agent's.
	ports := gw.unusedPorts(t, len(cases))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := gatewayMetrics(t, ctx, l, b, a.ClusterID)
			mem := &peakMemory{}
			stopSampling := mem.sample(t, ctx, l, b, a.ClusterID)
			defer stopSampling()
			// A's own agent may not reconnect while the case runs: its
			// new session would replace this one.
			prev, err := importsStored(ctx, l, b, a.ClusterID)
			if err != nil {
				t.Fatal(err)
			}
			local := netip.AddrPortFrom(from, ports[i])
			unblock := gw.blockAgent(t, to, int(ports[0]), int(ports[len(ports)-1]))
			defer unblock()
			conn, err := gw.dial(local, to)
			if err != nil {
				t.Fatalf("connect from A's tunnel address %s to %s: %v", local, to, err)
			}
			defer conn.Close()
			began := time.Now()
			go func() {
				_, _ = conn.Write(tc.payload)
				if tc.stored < 0 {
					// Past a limit the gateway stores each batch it
					// takes as it goes: the end of the session tells it
					// has read them all.
					_ = conn.(interface{ CloseWrite() error }).CloseWrite()
				}
			}()
			if tc.refused != "" {
				// B's gateway ends a refused connection itself.
				_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, _ = io.Copy(io.Discard, conn)
				ended := time.Since(began)
				time.Sleep(500 * time.Millisecond)
				after := gatewayMetrics(t, ctx, l, b, a.ClusterID)
				key := refusedMetric + `{reason="` + tc.refused + `"}`
				if after[key] <= before[key] {
					t.Errorf("%s: %v before, %v after: the refusal is not counted", key, before[key], after[key])
				}
				if ended > 5*time.Second {
					t.Errorf("B's gateway took %v to refuse", ended)
				}
				t.Logf("%d bytes sent; B's gateway ended the connection after %v", len(tc.payload), ended.Round(time.Millisecond))
			} else {
				ended := make(chan struct{})
				go func() { _, _ = io.Copy(io.Discard, conn); close(ended) }()
				var set mcs.Set
				last := -1
				waitFor(t, ctx, 4*time.Minute, "B's gateway stores the set", func() error {
					var err error
					if set, err = importsStored(ctx, l, b, a.ClusterID); err != nil {
						return err
					}
					if tc.stored < 0 {
						// The whole session read, what it left stored
						// the same twice in a row, and not the set of
						// the case before.
						if maps.EqualFunc(set, prev, func(mcs.Service, mcs.Service) bool { return true }) {
							return fmt.Errorf("%d services stored, the set before this session", len(set))
						}
						select {
						case <-ended:
						default:
							return fmt.Errorf("%d services stored, B's gateway still reading the session", len(set))
						}
						if n := last; n != len(set) {
							last = len(set)
							return fmt.Errorf("%d services stored, %d before", len(set), n)
						}
					}
					after := gatewayMetrics(t, ctx, l, b, a.ClusterID)
					for rule, want := range tc.rejected {
						got := after[rejectedMetric+`{reason="`+rule+`"}`] - before[rejectedMetric+`{reason="`+rule+`"}`]
						if want >= 0 && got != want || want < 0 && got == 0 {
							return fmt.Errorf("%s rejected for %s, want %v (stored %d)", strconv.FormatFloat(got, 'f', -1, 64), rule, want, len(set))
						}
					}
					// The gateway counts before it writes: the set it
					// stores is the session's once it holds more than
					// A's own.
					if tc.stored >= 0 && len(set) != tc.stored || tc.stored < 0 && len(set) <= len(good) {
						return fmt.Errorf("%d services stored, want %d", len(set), tc.stored)
					}
					return nil
				})
				after := gatewayMetrics(t, ctx, l, b, a.ClusterID)
				t.Logf("%d bytes sent; B's gateway stores %d services after %v; rejected by rule: %s", len(tc.payload), len(set),
					time.Since(began).Round(time.Millisecond), rejectedByRule(before, after))
				if tc.check != nil {
					tc.check(t)
				}
				// The session's set held all along: A's own agent did
				// not come back meanwhile.
				if again, err := importsStored(ctx, l, b, a.ClusterID); err != nil || len(again) != len(set) {
					t.Errorf("B's gateway stores %d services after the checks, %d before (%v): A's agent replaced the session", len(again), len(set), err)
				}
			}
			t.Logf("B's gateway's resident memory %.0f MiB before, at most %.0f MiB meanwhile; B's controller's at most %.0f MiB so far",
				before[residentMemory]/(1<<20), mem.peak()/(1<<20), ctrlMem.peak()/(1<<20))
			// Nothing of it applied: no address outside A's ranges in any
			// imported slice.
			out := kubectlOut(t, ctx, l, b, "get", "endpointslices", "-A", "-l", mcsv1beta1.LabelSourceCluster+"="+a.ClusterID,
				"-o", "jsonpath={.items[*].endpoints[*].addresses[*]}")
			for _, bad := range []string{"8.8.8.8", "169.254.169.254", b.NodeIP().String()} {
				if strings.Contains(" "+out+" ", " "+bad+" ") {
					t.Errorf("B imported the endpoint %s", bad)
				}
			}
			// A's own agent comes back with A's set: B serves echo, alone.
			unblock()
			conn.Close()
			waitFor(t, ctx, 6*time.Minute, "B calls echo again, its only import", serving)
		})
	}
	stopCtrl()
	t.Logf("B's controller: resident memory %.0f MiB before the hostile sessions, at most %.0f MiB over the %v of the test (cgroup memory.peak %s)",
		baseline/(1<<20), ctrlMem.peak()/(1<<20), time.Since(start).Round(time.Second), controllerMemoryPeak(t, ctx, b))
	if ctrlMem.peak() > controllerMemoryBound {
		t.Errorf("B's controller reached %.0f MiB, over the bound of %d MiB", ctrlMem.peak()/(1<<20), controllerMemoryBound>>20)
	}
}

// noise is 48 hexadecimal digits that compress badly.
func noise(n uint64) string {
	return fmt.Sprintf("%016x%016x%016x", n*0x9e3779b97f4a7c15, (n+1)*0xbf58476d1ce4e5b9, (n+2)*0x94d049bb133111eb)
}

// importsStored reads the set cluster n's gateway stored of what peer
// peerID sent.
func importsStored(ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) (mcs.Set, error) {
	return storedSet(ctx, l, n, peerID, mcs.ImportsConfigMap, mcs.ImportsRole)
}

// storedSet reads the set of the exchange role (mcs.ExportsRole or
// mcs.ImportsRole) stored in the tenant namespace of peer peerID in n.
func storedSet(ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID, name, role string) (mcs.Set, error) {
	c, err := l.Client(n)
	if err != nil {
		return nil, err
	}
	stored, err := store.Read(ctx, c, manifests.TenantNamespace(peerID), name, role)
	if err != nil {
		return nil, err
	}
	set, _, err := mcs.DecodeShards(stored.Shards, mcs.DefaultLimits, time.Now())
	return set, err
}

// storedShards returns the shards of the imports of peer peerID in n.
func storedShards(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) []mcs.Shard {
	t.Helper()
	c, err := l.Client(n)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Read(ctx, c, manifests.TenantNamespace(peerID), mcs.ImportsConfigMap, mcs.ImportsRole)
	if err != nil {
		t.Fatal(err)
	}
	return stored.Shards
}

// rejectedByRule says how many services B's gateway newly rejected, by
// rule, between two readings of its metrics.
func rejectedByRule(before, after map[string]float64) string {
	var out []string
	for _, rule := range mcs.Rules() {
		key := rejectedMetric + `{reason="` + rule + `"}`
		if d := after[key] - before[key]; d != 0 {
			out = append(out, fmt.Sprintf("%s %v", rule, d))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// exportedSet reads the services cluster n sends the peer peerID, as its
// controller wrote them for its gateway.
func exportedSet(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) []mcs.Service {
	t.Helper()
	var set mcs.Set
	eventually(t, ctx, "the export set of "+n.Name, func() error {
		var err error
		set, err = storedSet(ctx, l, n, peerID, mcs.ExportsConfigMap, mcs.ExportsRole)
		if err == nil && (len(set) == 0 || len(set[mcs.Key{Namespace: labctl.EchoNamespace, Name: "echo"}].Endpoints) == 0) {
			err = errors.New("no echo with endpoints yet")
		}
		return err
	})
	return set.Sorted()
}

// hostileTable is the nftables table that keeps the gateway's own agent
// from opening connections.
const hostileTable = "peerlink-hostile-test"

// unusedPorts returns n local ports below the range the kernel picks
// connections' ports from in the gateway pod's namespace.
func (g *hostileGateway) unusedPorts(t *testing.T, n int) []uint16 {
	t.Helper()
	out, err := g.run("cat", "/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("the gateway pod's local port range: %v: %s", err, out)
	}
	f := strings.Fields(string(out))
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 1024+n {
		t.Fatalf("the gateway pod's local port range %q leaves no room below it", out)
	}
	var ports []uint16
	for i := range n {
		ports = append(ports, uint16(low-n-1+i))
	}
	return ports
}

// blockAgent keeps the gateway's own agent from connecting to the service
// exchange at to: new connections from ports outside lo..hi are reset, so
// that the attacker's, from those ports, are the only ones.
func (g *hostileGateway) blockAgent(t *testing.T, to netip.AddrPort, lo, hi int) (unblock func()) {
	t.Helper()
	rules := fmt.Sprintf(`table inet %s {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr %s tcp dport %d tcp sport != %d-%d tcp flags & (syn | ack) == syn reject with tcp reset
	}
}
`, hostileTable, to.Addr(), to.Port(), lo, hi)
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(g.pid), "-n", "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("block the agent's connections: %v: %s", err, out)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if out, err := g.run("nft", "delete", "table", "inet", hostileTable); err != nil {
				t.Errorf("unblock the agent's connections: %v: %s", err, out)
			}
		})
	}
}

// dial opens a TCP connection from the gateway pod's network namespace,
// from address from.
func (g *hostileGateway) dial(from, to netip.AddrPort) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine and
		// is not reused in the pod's namespace. The socket stays there.
		runtime.LockOSThread()
		h, err := vnetns.GetFromPid(g.pid)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := vnetns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(from)}
		c, err := d.Dial("tcp", to.String())
		ch <- result{c, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// frame is v as one frame of the exchange: a 4-byte length and JSON.
func frame(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// cloneBytes copies b, so that appending to the copy leaves b alone.
func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

const (
	refusedMetric  = "peerlink_gateway_service_exchange_refused_total"
	rejectedMetric = "peerlink_gateway_service_exchange_refused_services_total"
	residentMemory = "process_resident_memory_bytes"
)

// gatewayMetrics reads the metrics of cluster n's gateway for peerID, by
// name and labels as exposed.
func gatewayMetrics(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) map[string]float64 {
	t.Helper()
	out, err := l.Kubectl(ctx, n, "get", "--raw", gatewayMetricsPath(t, ctx, l, n, peerID))
	if err != nil {
		t.Fatalf("metrics of the gateway of %s: %v", n.Name, err)
	}
	return labctl.ParseMetrics(out)
}

// gatewayMetricsPath is the path, on n's API server, of the metrics of n's
// active gateway pod for peerID.
func gatewayMetricsPath(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) string {
	t.Helper()
	ns := manifests.TenantNamespace(peerID)
	pod := strings.TrimSpace(string(mustKubectl(t, ctx, l, n, "-n", ns, "get", "pods",
		"-l", "networking.liqo.io/active=true", "-o", "jsonpath={.items[0].metadata.name}")))
	return labctl.MetricsPath(ns, pod, labctl.GatewayMetricsPort)
}

// peakMemory keeps the highest resident memory a component reported.
type peakMemory struct {
	mu  sync.Mutex
	max float64
}

func (p *peakMemory) peak() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// sampleFrom reads the resident memory from the metrics at the paths of
// n's API server, every interval, until the returned function is called.
func (p *peakMemory) sampleFrom(t *testing.T, ctx context.Context, n *cluster.Cluster, interval time.Duration, paths func() []string) (stop func()) {
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, path := range paths() {
				out, err := cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
				if err != nil {
					continue
				}
				if v, ok := labctl.ParseMetrics(out)[residentMemory]; ok {
					p.mu.Lock()
					p.max = max(p.max, v)
					p.mu.Unlock()
				}
			}
			time.Sleep(interval)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// sample reads the resident memory of n's gateway for peerID until the
// returned function is called.
func (p *peakMemory) sample(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) (stop func()) {
	path := gatewayMetricsPath(t, ctx, l, n, peerID)
	return p.sampleFrom(t, ctx, n, 100*time.Millisecond, func() []string { return []string{path} })
}

// sampleController reads the resident memory of n's controller pods, from
// their metrics, until the returned function is called.
func (p *peakMemory) sampleController(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) (stop func()) {
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return p.sampleFrom(t, ctx, n, 250*time.Millisecond, func() []string {
		pods, err := cs.CoreV1().Pods(labctl.PeerlinkNamespace).List(ctx, metav1.ListOptions{LabelSelector: labctl.ControllerSelector})
		if err != nil {
			return nil
		}
		var paths []string
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning {
				paths = append(paths, labctl.MetricsPath(labctl.PeerlinkNamespace, pod.Name, labctl.ControllerMetricsPort))
			}
		}
		return paths
	})
}

// controllerMemoryPeak reads the most memory the cgroup of n's controller
// container used (memory.peak, or memory.max_usage_in_bytes under cgroup
// v1), or says why it cannot.
func controllerMemoryPeak(t *testing.T, ctx context.Context, n *cluster.Cluster) string {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods(labctl.PeerlinkNamespace).List(ctx, metav1.ListOptions{LabelSelector: labctl.ControllerSelector})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no controller pod (%v)", err)
	}
	var uids []string
	for _, p := range pods.Items {
		uids = append(uids, string(p.UID), strings.ReplaceAll(string(p.UID), "-", "_"))
	}
	pid, ok := findAgent("controller", func(pid int, _ string) bool {
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		return slices.ContainsFunc(uids, func(u string) bool { return strings.Contains(string(cg), u) })
	})
	if !ok {
		return "no controller process of " + n.ClusterID + " found"
	}
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var file string
		switch {
		case f[0] == "0" && f[1] == "":
			file = filepath.Join("/sys/fs/cgroup", f[2], "memory.peak")
		case f[1] == "memory":
			file = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.max_usage_in_bytes")
		default:
			continue
		}
		peak, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(peak)), 64); err == nil {
			return fmt.Sprintf("%.0f MiB", v/(1<<20))
		}
	}
	return "no memory peak in the cgroup of process " + strconv.Itoa(pid)
}
