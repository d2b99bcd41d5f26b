package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// Cluster is the API of one side.
type Cluster struct {
	// Kubeconfig is an admin kubeconfig for the API server on the host.
	Kubeconfig string
	// Client writes the side's objects.
	Client client.Client
}

// Remaps says how each side sees the other's pod and external ranges.
type Remaps struct {
	// AOfB is how side A sees B: pod range, external range.
	AOfB [2]netip.Prefix
	// BOfA is how side B sees A.
	BOfA [2]netip.Prefix
	// AOfB6 and BOfA6 are how each side sees the other's IPv6 pod range,
	// PodCIDR6. Set, they make both sides dual-stack; zero, both are
	// IPv4-only.
	AOfB6, BOfA6 netip.Prefix
}

// DualStack tells whether the sides are dual-stack.
func (r Remaps) DualStack() bool { return r.AOfB6.IsValid() }

// ServerPort is the WireGuard port of side B's gateway server.
const ServerPort = 51840

// Bed is a running peering: side A's gateway is the client, B's the server.
type Bed struct {
	Topology *Topology
	A, B     *Running
	dir, bin string
}

// Running is one side with its agents.
type Running struct {
	Side    *Side
	Cluster Cluster
	Peering Peering
	// Gateway and Fabric are the agent processes; Fabric2 is the fabric
	// agent of the second node.
	Gateway, Fabric, Fabric2 *proc.Process
	gatewayArgs              []string
	dir, bin                 string
	forwarders               []*Forwarder
}

// Option is a choice of Up beyond the remaps.
type Option func(*options)

type options struct {
	ipv6WAN bool
}

// IPv6Endpoint joins the gateways by an IPv6-only internet link: the
// client reaches the server's WireGuard endpoint at an IPv6 address
// (WANs6). The nodes and the overlay stay IPv4.
func IPv6Endpoint() Option { return func(o *options) { o.ipv6WAN = true } }

// Up builds the topology, writes both sides' objects and starts their agents
// (bin, built by BuildAgent), with logs and kubeconfigs under dir.
func Up(ctx context.Context, dir, bin string, a, b Cluster, remaps Remaps, opts ...Option) (*Bed, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if remaps.AOfB6.IsValid() != remaps.BOfA6.IsValid() {
		return nil, errors.New("remaps: AOfB6 and BOfA6 are set together (dual-stack sides) or not at all")
	}
	top, err := Build(remaps.DualStack(), o.ipv6WAN)
	if err != nil {
		return nil, err
	}
	bed := &Bed{Topology: top, dir: dir, bin: bin}
	keyA, errA := wgtypes.GeneratePrivateKey()
	keyB, errB := wgtypes.GeneratePrivateKey()
	if err := errors.Join(errA, errB); err != nil {
		return nil, errors.Join(err, bed.Close())
	}
	server := netip.AddrPortFrom(top.B.WAN, ServerPort)
	pa := Peering{LocalID: "cluster-a", PeerID: "cluster-b", Role: gatewayrole.Client,
		RemappedPod: remaps.AOfB[0], RemappedExternal: remaps.AOfB[1], RemappedPod6: remaps.AOfB6,
		PrivateKey: keyA, PeerPublicKey: keyB.PublicKey(), Server: server, NodeName: "node-a", NodeIP: top.A.NodeIP, GatewayIP: top.A.GatewayIP, GatewayIP6: top.A.GatewayIP6}
	pb := Peering{LocalID: "cluster-b", PeerID: "cluster-a", Role: gatewayrole.Server,
		RemappedPod: remaps.BOfA[0], RemappedExternal: remaps.BOfA[1], RemappedPod6: remaps.BOfA6,
		PrivateKey: keyB, PeerPublicKey: keyA.PublicKey(), Server: server, NodeName: "node-b", NodeIP: top.B.NodeIP, GatewayIP: top.B.GatewayIP, GatewayIP6: top.B.GatewayIP6}
	if bed.A, err = bed.start(ctx, top.A, a, pa); err != nil {
		return nil, errors.Join(err, bed.Close())
	}
	if bed.B, err = bed.start(ctx, top.B, b, pb); err != nil {
		return nil, errors.Join(err, bed.Close())
	}
	return bed, nil
}

func (bed *Bed) start(ctx context.Context, side *Side, c Cluster, p Peering) (*Running, error) {
	r := &Running{Side: side, Cluster: c, Peering: p, dir: filepath.Join(bed.dir, side.Name), bin: bed.bin}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	uid, err := Install(ctx, c.Client, p)
	if err != nil {
		return r, fmt.Errorf("side %s: %w", side.Name, err)
	}
	keys := filepath.Join(r.dir, "keys")
	if err := WriteKeys(keys, p.PrivateKey); err != nil {
		return r, err
	}
	api, err := APIServerAddress(c.Kubeconfig)
	if err != nil {
		return r, err
	}
	kubeconfig := func(ns *netns.NS, name string) (string, error) {
		f, err := Forward(ns, api)
		if err != nil {
			return "", err
		}
		r.forwarders = append(r.forwarders, f)
		path := filepath.Join(r.dir, name+".kubeconfig")
		return path, f.Kubeconfig(c.Kubeconfig, path)
	}
	nodeKC, err := kubeconfig(side.Node, "fabric")
	if err != nil {
		return r, err
	}
	node2KC, err := kubeconfig(side.Node2, "fabric2")
	if err != nil {
		return r, err
	}
	gwKC, err := kubeconfig(side.Gateway, "gateway")
	if err != nil {
		return r, err
	}
	fabric := func(ns *netns.NS, log, kubeconfig, node string, ip netip.Addr) (*proc.Process, error) {
		return start(ns, filepath.Join(r.dir, log), bed.bin, "fabric",
			"--kubeconfig="+kubeconfig, "--node-name="+node, "--node-ip="+ip.String(),
			"--mtu=1450", "--health-probe-bind-address=:6092", "--metrics-bind-address=0")
	}
	if r.Fabric, err = fabric(side.Node, "fabric.log", nodeKC, p.NodeName, p.NodeIP); err != nil {
		return r, err
	}
	if r.Fabric2, err = fabric(side.Node2, "fabric2.log", node2KC, p.NodeName+"-2", Node2IP); err != nil {
		return r, err
	}
	r.gatewayArgs = []string{"gateway",
		"--kubeconfig=" + gwKC,
		"--name=" + p.GatewayName(), "--namespace=" + p.Namespace(), "--remote-cluster-id=" + p.PeerID,
		"--mode=" + string(p.Role), "--gateway-uid=" + uid, "--mtu=1340",
		"--key-dir=" + keys, "--keepalive=25s", "--ping-interval=2s", "--node-ip=" + p.NodeIP.String(),
		"--local-cidr=" + strings.Join(p.localCIDRs(), ","),
	}
	if p.Role == gatewayrole.Server {
		r.gatewayArgs = append(r.gatewayArgs, "--listen-port="+strconv.Itoa(int(p.Server.Port())))
	} else {
		r.gatewayArgs = append(r.gatewayArgs, "--endpoint-address="+p.Server.Addr().String(), "--endpoint-port="+strconv.Itoa(int(p.Server.Port())))
	}
	return r, r.StartGateway()
}

// StartGateway starts the side's gateway agent.
func (r *Running) StartGateway() error {
	p, err := start(r.Side.Gateway, filepath.Join(r.dir, "gateway.log"), r.bin, r.gatewayArgs...)
	if err != nil {
		return err
	}
	r.Gateway = p
	return nil
}

// Close stops the agents (SIGTERM, so they clean up), the forwarders and
// deletes the namespaces.
func (bed *Bed) Close() error {
	var errs []error
	for _, r := range []*Running{bed.A, bed.B} {
		if r == nil {
			continue
		}
		for _, p := range []*proc.Process{r.Gateway, r.Fabric, r.Fabric2} {
			if p == nil {
				continue
			}
			select {
			case <-p.Exited:
			default:
				if err := p.Stop(10 * time.Second); err != nil {
					errs = append(errs, fmt.Errorf("stop agent of side %s: %w", r.Side.Name, err))
				}
			}
		}
		for _, f := range r.forwarders {
			_ = f.Close()
		}
	}
	if bed.Topology != nil {
		if err := bed.Topology.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
