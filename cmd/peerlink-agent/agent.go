package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/choice"
)

// agentFlags are the flags both dataplane agents take, flag for flag (the
// dataplane.AgentOptions), beside the process's.
type agentFlags struct {
	processFlags
	namespace, nodeIP, overlayKind string
	mtu                            int
	resync                         time.Duration
}

// agentFlagHelp is what the flags whose meaning depends on the agent mean
// to it: their help and defaults.
type agentFlagHelp struct {
	namespace, namespaceDefault string
	nodeIP                      string
	// overlayPeer is who the overlay encapsulation must agree with.
	overlayPeer string
	mtu         string
	mtuDefault  int
}

func (f *agentFlags) addFlags(fs *pflag.FlagSet, h agentFlagHelp) {
	fs.StringVar(&f.namespace, "namespace", h.namespaceDefault, h.namespace)
	fs.StringVar(&f.nodeIP, "node-ip", os.Getenv("NODE_IP"), h.nodeIP)
	fs.StringVar(&f.overlayKind, "overlay", string(overlay.Auto), "overlay encapsulation, as "+h.overlayPeer+": auto (geneve if the kernel has it, else vxlan), geneve or vxlan")
	fs.IntVar(&f.mtu, "mtu", h.mtuDefault, h.mtu)
	fs.DurationVar(&f.resync, "resync-interval", time.Second, "how often the kernel state is checked against the plan")
}

// options parses the flags; errors name them. The agent validates them
// with its own.
func (f *agentFlags) options() (dataplane.AgentOptions, error) {
	kind, err := choice.Parse("overlay", f.overlayKind, overlay.Auto, plan.Geneve, plan.VXLAN)
	if err != nil {
		return dataplane.AgentOptions{}, fmt.Errorf("--overlay: %w", err)
	}
	o := dataplane.AgentOptions{Namespace: f.namespace, Overlay: kind, MTU: f.mtu, ResyncInterval: f.resync}
	if f.nodeIP != "" {
		if o.NodeIP, err = netip.ParseAddr(f.nodeIP); err != nil {
			return dataplane.AgentOptions{}, fmt.Errorf("--node-ip %q: %w", f.nodeIP, err)
		}
	}
	return o, nil
}

// withAgentFlags adds to flags, the flags of an agent's own options by
// their field, those of the options both agents take.
func withAgentFlags(flags map[string]string) map[string]string {
	flags["Namespace"], flags["NodeIP"], flags["MTU"], flags["ResyncInterval"] = "--namespace", "--node-ip", "--mtu", "--resync-interval"
	return flags
}

// commaList splits a comma-separated flag value, leaving out empty items:
// an empty value is an empty list, so that a manifest can pass
// --flag=$(VAR) with nothing in it.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
