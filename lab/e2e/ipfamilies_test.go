package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/mcs"
)

// TestIPFamilies peers clusters of every family over IPv6 and dual-stack, in
// one lab of five one-node clusters (one lab keeps the bring-up to one):
// an IPv6-only pair with identical pod ranges (fd44::/48 both), a
// dual-stack pair (identical in both families), and that dual-stack
// cluster with an IPv4-only one. In each pair, pods reach each other both
// ways in every family both sides have, at the remapped address, and see
// the caller remapped; a Service exported by one side answers the other by
// its clusterset name and at each of its imported addresses. The peering
// of the dual-stack cluster with the IPv4-only one has nothing IPv6 in its
// gateways. Then hostile IPv6 ranges a peer could declare are refused,
// naming the range and the rule, and routed nowhere.
func TestIPFamilies(t *testing.T) {
	sideBySide(t)
	start := time.Now()
	phase := func(what string) { t.Logf("phase %q done at %.1fs", what, time.Since(start).Seconds()) }
	ctx, l := newLabWith(t, 12*time.Minute, labctl.Options{
		Names:      []string{"fam6-a", "fam6-b", "famd-a", "famd-b", "fam4"},
		IPFamilies: []cluster.IPFamily{cluster.IPv6, cluster.IPv6, cluster.DualStack, cluster.DualStack, cluster.IPv4},
	})
	v6a, v6b, da, db, v4 := l.Clusters[0], l.Clusters[1], l.Clusters[2], l.Clusters[3], l.Clusters[4]
	phase("lab up")

	pairs := []struct {
		name string
		a, b *cluster.Cluster
		// families is how many of the pods' addresses (primary first)
		// both sides have.
		families int
	}{{"IPv6-only", v6a, v6b, 1}, {"dual-stack", da, db, 2}, {"dual-stack with IPv4-only", da, v4, 1}}
	for _, p := range pairs {
		if out, err := l.Connect(ctx, p.a, p.b); err != nil {
			t.Fatalf("connect %s to %s: %v\n%s", p.a.Name, p.b.Name, err, out)
		}
	}
	phase("connected by network connect")

	for _, n := range []*cluster.Cluster{v6a, v6b, da, db, v4} {
		exportDualStack(t, ctx, l, n)
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			// Waited for here, so that a pair that does not connect fails
			// its own case only.
			waitConnected(t, ctx, l, p.a, p.b)
			podsA, podsB := echoPods(t, ctx, l, p.a), echoPods(t, ctx, l, p.b)
			for i := range p.families {
				checkFamilyTraffic(t, ctx, l, p.a, podsA[0], p.b, podsB[0], i)
				checkFamilyTraffic(t, ctx, l, p.b, podsB[1], p.a, podsA[1], i)
			}
			callDualStackExport(t, ctx, l, p.a, podsA[0], p.b, podsB, p.families)
			callDualStackExport(t, ctx, l, p.b, podsB[0], p.a, podsA, p.families)
		})
		phase(p.name)
	}
	t.Run("nothing IPv6 between the dual-stack and the IPv4-only cluster", func(t *testing.T) {
		checkNoIPv6Planned(t, ctx, l, da, v4)
		checkNoIPv6Planned(t, ctx, l, v4, da)
	})

	t.Run("hostile IPv6 ranges", func(t *testing.T) {
		ns := "liqo-tenant-" + v6b.ClusterID
		refused := map[string]struct{ pod, rule string }{
			"loopback":   {"::1/128", "loopback"},
			"link-local": {"fe80::/64", "link-local"},
			"multicast":  {"ff02::/16", "multicast"},
			"global":     {"2001:4860::/32", "outside the allowed peer ranges"},
		}
		var manifests []string
		for name, r := range refused {
			manifests = append(manifests, hostileConfigurationIn(ns, v6b.ClusterID+"-"+name, v6b.ClusterID+"-"+name, r.pod, ""))
		}
		applyManifests(t, ctx, l, v6a, manifests)
		for name, r := range refused {
			conf := v6b.ClusterID + "-" + name
			waitCondition(t, ctx, l, v6a, ns, conf, "Stalled", "True")
			msg := strings.TrimSpace(string(mustKubectl(t, ctx, l, v6a, "-n", ns, "get", "configuration", conf,
				"-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].message}`)))
			if !strings.Contains(msg, r.pod) || !strings.Contains(msg, r.rule) {
				t.Errorf("Configuration %s of %s: Stalled with %q, want the range %s and the rule %q named", conf, r.pod, msg, r.pod, r.rule)
			}
			t.Logf("%s refused: %s", r.pod, msg)
		}
		// Wait for a fabric sync after the last Configuration.
		time.Sleep(3 * time.Second)
		node := nodeNS(t, v6a)
		routes := node.MustRun(t, "ip", "-6", "route", "show", "table", "all")
		for _, r := range refused {
			for _, line := range strings.Split(routes, "\n") {
				if strings.HasPrefix(line, r.pod+" ") && strings.Contains(line, "table 18") {
					t.Errorf("%s routes the refused range %s in a peerlink table: %s", v6a.Name, r.pod, line)
				}
			}
		}
		for _, addr := range []string{"2001:4860::8888", "ff02::1:2"} {
			if out, err := node.Run("ip", "-6", "route", "get", addr); err == nil && strings.Contains(out, dataplane.OverlayLink) {
				t.Errorf("%s sends %s to a peer: %s", v6a.Name, addr, out)
			}
		}
		podsA, podsB := echoPods(t, ctx, l, v6a), echoPods(t, ctx, l, v6b)
		checkFamilyTraffic(t, ctx, l, v6b, podsB[0], v6a, podsA[0], 0)
	})
	phase("hostile IPv6 ranges")
}

// checkFamilyTraffic is checkTraffic over the i-th address family of the
// pods (0 the primary): from of src reaches to of dst at the address src
// knows to's i-th address by, remapped as the ranges collide, and to sees
// the caller's i-th address remapped into dst's view of src.
func checkFamilyTraffic(t *testing.T, ctx context.Context, l *labctl.Lab, src *cluster.Cluster, from corev1.Pod, dst *cluster.Cluster, to corev1.Pod, i int) {
	t.Helper()
	if len(from.Status.PodIPs) <= i || len(to.Status.PodIPs) <= i {
		t.Fatalf("pods %s (%v) and %s (%v): no address of family %d on both", from.Name, from.Status.PodIPs, to.Name, to.Status.PodIPs, i)
	}
	fromIP, toIP := from.Status.PodIPs[i].IP, to.Status.PodIPs[i].IP
	var target, wantClient netip.Addr
	eventually(t, ctx, fmt.Sprintf("%s sees %s and %s sees %s remapped", src.Name, toIP, dst.Name, fromIP), func() error {
		var err error
		if target, err = l.RemappedIP(ctx, src, dst, toIP); err != nil {
			return err
		}
		wantClient, err = l.RemappedIP(ctx, dst, src, fromIP)
		return err
	})
	// Identical ranges on both sides: each must remap the other's.
	if target.String() == toIP || wantClient.String() == fromIP {
		t.Errorf("%s reaches %s at %s and %s sees %s as %s: want both remapped, the ranges collide", src.Name, toIP, target, dst.Name, fromIP, wantClient)
	}
	url := labctl.EchoURL(target)
	eventually(t, ctx, fmt.Sprintf("%s/%s reaches %s/%s at %s", src.Name, from.Name, dst.Name, to.Name, url), func() error {
		got, err := l.EchoGet(ctx, src, from.Name, url)
		if err != nil {
			return err
		}
		if got.Reply.Pod != to.Name {
			return fmt.Errorf("answered by %s (%s), want %s", got.Reply.Pod, got.Reply.PodIP, to.Name)
		}
		client, err := netip.ParseAddrPort(got.Reply.Client)
		if err != nil {
			return err
		}
		if client.Addr() != wantClient {
			t.Errorf("%s saw the caller %s (%s) as %s, want %s", dst.Name, from.Name, fromIP, client.Addr(), wantClient)
		}
		t.Logf("%s %s -> %s: answered by %s (%s), caller seen as %s", src.Name, fromIP, url, got.Reply.Pod, got.Reply.PodIP, got.Reply.Client)
		return nil
	})
}

// exportDualStack exports from n the Service echo-<n's name> of the lab's
// echo pods, of every family n has (PreferDualStack), in a namespace that
// takes the peers' exports too.
func exportDualStack(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) {
	t.Helper()
	ns := labctl.EchoNamespace
	kubectlOut(t, ctx, l, n, "label", "--overwrite", "namespace", ns, mcs.ImportNamespaceLabel+"=true")
	applyManifest(t, ctx, l, n, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: echo-%s
  namespace: %s
spec:
  ipFamilyPolicy: PreferDualStack
  selector:
    app: %s
  ports:
  - name: http
    port: %d
`, n.Name, ns, labctl.EchoDeployment, labctl.EchoPort))
	export(t, ctx, l, n, ns, "echo-"+n.Name)
}

// callDualStackExport calls from pod of a the Service b exports with
// exportDualStack: by its clusterset name, and at each of the addresses a
// imported it with, which must be families of them, until one of b's pods
// answers each.
func callDualStackExport(t *testing.T, ctx context.Context, l *labctl.Lab, a *cluster.Cluster, pod corev1.Pod, b *cluster.Cluster, bPods []corev1.Pod, families int) {
	t.Helper()
	svc := "echo-" + b.Name
	var ips []string
	eventually(t, ctx, a.Name+" imports "+svc+" with an address of each family both have", func() error {
		out, err := l.Kubectl(ctx, a, "-n", labctl.EchoNamespace, "get", "serviceimport", svc, "-o", "jsonpath={.spec.ips[*]}")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if ips = strings.Fields(string(out)); len(ips) != families {
			return fmt.Errorf("ServiceImport %s has addresses %v, want %d", svc, ips, families)
		}
		return nil
	})
	urls := []string{fmt.Sprintf("http://%s.%s.svc.%s:%d/", svc, labctl.EchoNamespace, cluster.ClustersetDomain, labctl.EchoPort)}
	for _, ip := range ips {
		urls = append(urls, labctl.EchoURL(netip.MustParseAddr(ip)))
	}
	for _, url := range urls {
		callEcho(t, ctx, l, a, pod, b, bPods, url)
	}
}

// checkNoIPv6Planned fails the test when the gateway of n for peer, a
// peering of IPv4 only, has an ip6 table or routes IPv6 anywhere but to
// its unreachable default. (The controller of an IPv4-only cluster still
// gives a dual-stack peer's IPv6 range a remapped range; its dataplane
// leaves it out, as it has no IPv6 pods.)
func checkNoIPv6Planned(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster) {
	t.Helper()
	gw := gatewayAgent(t, ctx, l, n, peer.ClusterID)
	tables, err := gw.run("nft", "list", "tables")
	if err != nil {
		t.Fatalf("nft list tables in the gateway of %s for %s: %v: %s", n.Name, peer.Name, err, tables)
	}
	if strings.Contains(string(tables), "table ip6 ") {
		t.Errorf("the gateway of %s for %s (IPv4 only) has an ip6 table:\n%s", n.Name, peer.Name, tables)
	}
	routes, err := gw.run("ip", "-6", "route", "show", "table", "all")
	if err != nil {
		t.Fatalf("IPv6 routes of the gateway of %s for %s: %v: %s", n.Name, peer.Name, err, routes)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(routes)), "\n") {
		// The kernel's own: local and link-local routes of the links.
		if strings.Contains(line, "table local") || strings.HasPrefix(line, "fe80::/64") || strings.HasPrefix(line, "multicast") ||
			strings.HasPrefix(line, "unreachable default") || strings.HasPrefix(line, "unreachable ::/0") || line == "" {
			continue
		}
		if strings.Contains(line, "table 18") {
			t.Errorf("the gateway of %s for %s (IPv4 only) routes IPv6: %s", n.Name, peer.Name, line)
		}
	}
	t.Logf("the gateway of %s for %s: nftables %s; IPv6 routes:\n%s", n.Name, peer.Name, strings.Join(strings.Fields(string(tables)), " "), routes)
}
