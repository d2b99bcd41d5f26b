package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// CreateNetwork makes the cluster's node network: a bridge on the host
// carrying the host's address, and each node's namespace joined to it by a
// veth. The namespaces must not exist yet.
func (c *Cluster) CreateNetwork() error {
	br := c.BridgeName()
	cmds := [][]string{
		{"ip", "link", "add", br, "type", "bridge"},
		{"ip", "addr", "add", netip.PrefixFrom(HostIP(c.Index), 24).String(), "dev", br},
	}
	if c.IPFamily.HasIPv6() {
		// nodad: see netns.Pair.
		cmds = append(cmds, []string{"ip", "-6", "addr", "add", netip.PrefixFrom(HostIP6(c.Index), 64).String(), "dev", br, "nodad"})
	}
	for _, argv := range append(cmds, []string{"ip", "link", "set", br, "up"}) {
		if out, err := runHost(argv...); err != nil {
			return fmt.Errorf("cluster %s node network: %w: %s", c.Name, err, out)
		}
	}
	for _, n := range c.Nodes() {
		if err := n.pair().Create(); err != nil {
			return fmt.Errorf("node %s: %w", n.Name(), err)
		}
	}
	return nil
}

// DeleteNetwork removes what CreateNetwork made for cluster index i,
// whatever its number of nodes: each node's namespace, with its veth, and
// the bridge. Missing pieces are no error.
func DeleteNetwork(i int) error {
	var errs []error
	for _, n := range maxNodes(i) {
		// The veth's host end goes first: the kernel removes a namespace,
		// and with it the veth, only some time after the last reference.
		if err := n.pair().Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	if hostIfExists(BridgeName(i)) {
		if out, err := runHost("ip", "link", "del", BridgeName(i)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s", err, out))
		}
	}
	if pathTableExists(i) {
		if out, err := runHost("nft", "delete", "table", "ip", pathTable(i)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s", err, out))
		}
	}
	return errors.Join(errs...)
}

// pathTable is the host's nftables table that NarrowPath writes for
// cluster index i.
func pathTable(i int) string { return fmt.Sprintf("peerlink-lab-path-%d", i) }

func pathTableExists(i int) bool {
	_, err := runHost("nft", "list", "table", "ip", pathTable(i))
	return err == nil
}

// NarrowPath makes the way into the cluster's node network from the other
// clusters carry packets of at most mtu bytes, and keep quiet about larger
// ones: the host, which routes between the clusters, gets a bridge of that
// MTU and drops the "fragmentation needed" it would send back. That is a
// path MTU black hole, a smaller link behind a firewall that filters ICMP:
// larger packets with the don't-fragment bit vanish, as users of such paths
// see them vanish. Traffic inside the cluster does not cross the host's
// routing and keeps its MTU. DeleteNetwork undoes it.
func (c *Cluster) NarrowPath(mtu int) error {
	// The quoted header of an ICMP error starts 8 bytes into it; its
	// destination address 16 bytes further: /24 of the node network.
	nw := c.NodeNetwork().Addr().As4()
	quotedDst := fmt.Sprintf("0x%02x%02x%02x", nw[0], nw[1], nw[2])
	ruleset := fmt.Sprintf(`table ip %s {
	chain output {
		type filter hook output priority 0; policy accept;
		icmp type destination-unreachable icmp code frag-needed @th,192,24 %s drop
	}
}
`, pathTable(c.Index), quotedDst)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster %s: host nftables table %s: %w: %s", c.Name, pathTable(c.Index), err, out)
	}
	if out, err := runHost("ip", "link", "set", c.BridgeName(), "mtu", strconv.Itoa(mtu)); err != nil {
		return fmt.Errorf("cluster %s: MTU of bridge %s: %w: %s", c.Name, c.BridgeName(), err, out)
	}
	return nil
}

// NetworkLeftovers names what of cluster index i's node network exists.
func NetworkLeftovers(i int) []string {
	var out []string
	for _, n := range maxNodes(i) {
		if netns.Exists(n.Namespace()) {
			out = append(out, "network namespace "+n.Namespace())
		}
		if n.pair().HostIfExists() {
			out = append(out, "interface "+n.HostIf())
		}
	}
	if hostIfExists(BridgeName(i)) {
		out = append(out, "interface "+BridgeName(i))
	}
	if pathTableExists(i) {
		out = append(out, "nftables table ip "+pathTable(i))
	}
	return out
}

func hostIfExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func (n *Node) pair() netns.Pair {
	p := netns.Pair{
		Namespace: n.Namespace(),
		HostIf:    n.HostIf(),
		HostAddr:  netip.PrefixFrom(HostIP(n.Cluster.Index), 24),
		NodeAddr:  netip.PrefixFrom(n.IP(), 24),
		Bridge:    n.Cluster.BridgeName(),
	}
	if n.Cluster.IPFamily.HasIPv6() {
		p.HostAddr6, p.NodeAddr6 = netip.PrefixFrom(HostIP6(n.Cluster.Index), 64), netip.PrefixFrom(n.IP6(), 64)
	}
	return p
}

// configureNamespace sets the sysctls of the node's network namespace: it
// forwards, since the pods behind the CNI bridge are routed through it; the
// bridge netfilter switch makes pod-to-service traffic between pods of the
// same bridge go through kube-proxy's rules; and reverse-path filtering is
// strict, as on common cloud images, so that a route missing for a source
// shows up as a drop. A cluster with IPv6 forwards IPv6 too.
func (n *Node) configureNamespace() error {
	ns, err := netns.Open(n.Namespace())
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name(), err)
	}
	defer ns.Close()
	sysctls := [][2]string{
		{"net/ipv4/ip_forward", "1"},
		{"net/bridge/bridge-nf-call-iptables", "1"},
		{"net/bridge/bridge-nf-call-ip6tables", "1"},
		{"net/ipv4/conf/all/rp_filter", "1"},
		{"net/ipv4/conf/default/rp_filter", "1"},
		{"net/ipv4/conf/eth0/rp_filter", "1"},
	}
	if n.Cluster.IPFamily.HasIPv6() {
		sysctls = append(sysctls, [2]string{"net/ipv6/conf/all/forwarding", "1"})
	}
	return ns.Do(func() error {
		for _, kv := range sysctls {
			if err := netns.WriteSysctl(kv[0], kv[1]); err != nil {
				return fmt.Errorf("node %s: network namespace %s: %w", n.Name(), ns.Name, err)
			}
		}
		return nil
	})
}

// podCIDRs waits until every node is registered and has its part of each
// pod range, and returns the parts by node name, in the order of PodCIDRs.
func (c *Cluster) podCIDRs(ctx context.Context, watch watcher) (map[string][]netip.Prefix, error) {
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	want := len(c.PodCIDRs())
	out := map[string][]netip.Prefix{}
	err = watch(ctx, "every node registered with its pod ranges", func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, node := range nodes.Items {
			var ranges []netip.Prefix
			for _, s := range node.Spec.PodCIDRs {
				if p, err := netip.ParsePrefix(s); err == nil {
					ranges = append(ranges, p)
				}
			}
			if len(ranges) == want {
				out[node.Name] = ranges
			}
		}
		return len(out) == c.NodeCount, fmt.Errorf("%d of %d nodes have their %d pod ranges", len(out), c.NodeCount, want)
	})
	return out, err
}

// setUpBridge gives every node the CNI bridge configuration of its pod
// ranges, a route to every other node's pod ranges through that node (each
// family through the node's address of that family), and the masquerade
// of traffic leaving the cluster's pod ranges, which the bridge plugin's
// own ipMasq would apply to pods of other nodes too.
func (c *Cluster) setUpBridge(podCIDRs map[string][]netip.Prefix) error {
	for _, n := range c.Nodes() {
		own, ok := podCIDRs[n.Name()]
		if !ok {
			return fmt.Errorf("node %s: no pod range", n.Name())
		}
		if err := n.writeCNIConfig(own, 0); err != nil {
			return err
		}
		ns, err := netns.Open(n.Namespace())
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name(), err)
		}
		var cmds [][]string
		for _, r := range c.PodCIDRs() {
			tables := "iptables"
			if r.Addr().Is6() {
				tables = "ip6tables"
			}
			cmds = append(cmds, []string{tables, "-t", "nat", "-A", "POSTROUTING", "-s", r.String(), "!", "-d", r.String(),
				"-m", "comment", "--comment", "lab: pods leaving the cluster", "-j", "MASQUERADE"})
		}
		for _, other := range c.Nodes() {
			if other.Ordinal == n.Ordinal {
				continue
			}
			for i, r := range podCIDRs[other.Name()] {
				cmds = append(cmds, []string{"ip", "route", "replace", r.String(), "via", other.IPs()[i].String()})
			}
		}
		for _, argv := range cmds {
			if _, err := ns.Run(argv[0], argv[1:]...); err != nil {
				ns.Close()
				return fmt.Errorf("node %s: %w", n.Name(), err)
			}
		}
		ns.Close()
	}
	return nil
}

// FlannelRunDir is where flanneld writes each node's subnet file, one
// directory for the cluster since its nodes share the host's file system.
func (c *Cluster) FlannelRunDir() string { return c.path("flannel") }

// setUpFromFlannel waits for the subnet file flanneld writes for each node
// and turns it into the node's CNI configuration, as Flannel's CNI plugin
// does at every pod start: a bridge on the node's lease, with the MTU of
// the VXLAN device, and no masquerade of its own when flanneld masquerades.
func (c *Cluster) setUpFromFlannel(ctx context.Context, watch watcher) error {
	for _, n := range c.Nodes() {
		file := filepath.Join(c.FlannelRunDir(), n.Name()+".env")
		var env map[string]string
		err := watch(ctx, "flanneld's subnet file of node "+n.Name(), func(context.Context) (bool, error) {
			var err error
			env, err = readEnvFile(file)
			return err == nil && env["FLANNEL_SUBNET"] != "", err
		})
		if err != nil {
			return err
		}
		subnet, err := netip.ParsePrefix(env["FLANNEL_SUBNET"])
		if err != nil {
			return fmt.Errorf("node %s: %s: FLANNEL_SUBNET: %w", n.Name(), file, err)
		}
		mtu, err := strconv.Atoi(env["FLANNEL_MTU"])
		if err != nil {
			return fmt.Errorf("node %s: %s: FLANNEL_MTU: %w", n.Name(), file, err)
		}
		// The lease names the gateway's address (.1), the subnet itself is
		// the node's part of the pod range.
		if err := n.writeCNIConfig([]netip.Prefix{subnet.Masked()}, mtu); err != nil {
			return err
		}
	}
	return nil
}

// runHost runs a program in the host's namespaces and returns its output.
func runHost(argv ...string) ([]byte, error) {
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

// readEnvFile reads a file of KEY=value lines.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// writeCNIConfig writes the node's CNI configuration: a bridge whose pods
// take an address from each of subnets (one per family, the primary first,
// as the Node's podCIDRs list them) and route everything of each family
// through the bridge, with the given MTU (0: the default of the bridge
// plugin).
func (n *Node) writeCNIConfig(subnets []netip.Prefix, mtu int) error {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, s := range subnets {
		ranges = append(ranges, []map[string]string{{"subnet": s.String()}})
		dst := "0.0.0.0/0"
		if s.Addr().Is6() {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	bridge := map[string]any{
		"type":        "bridge",
		"bridge":      "cni0",
		"isGateway":   true,
		"ipMasq":      false,
		"hairpinMode": true,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  ranges,
			"routes":  routes,
			"dataDir": n.path("cni", "ipam"),
		},
	}
	if mtu > 0 {
		bridge["mtu"] = mtu
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.Cluster.NetworkName(),
		"plugins":    []any{bridge},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return fmt.Errorf("node %s: CNI configuration: %w", n.Name(), err)
	}
	if err := os.WriteFile(n.path(cniConfDir, "10-lab.conflist"), b, 0o644); err != nil {
		return fmt.Errorf("node %s: CNI configuration: %w", n.Name(), err)
	}
	return nil
}
