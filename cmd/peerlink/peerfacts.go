package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/peering"
)

// The flags of the facts a peer's ranges are held to.
const (
	allowedPeerFlag = "allowed-peer-cidr"
	routedPeerFlag  = "routed-peer-cidr"
	clusterInfoFlag = "cluster-info"
)

// peerFactsHelp says, in the help of every command that takes them, how
// the facts a peer's ranges are held to are given.
var peerFactsHelp = `The peer's ranges are held to this cluster's facts, as its controller holds
them; bundle add, lint, create configuration and render take them the same
way. The allowlist is --allowed-peer-cidr (default
` + rangepolicy.Format(rangepolicy.DefaultAllowed()) + `; special-use
ranges never pass), the address plan for peers --routed-peer-cidr (default
none: every range is remapped); --cluster-info FILE (a saved
` + clusterinfo.Name + ` ConfigMap, or the output of peerlink info -o
yaml) gives both, as allowedPeerCIDRs and routedPeerCIDRs. A flag given wins
over the file; the file fills in what no flag gives. A range is reported as
routed as it is, naming the entry of the plan it lies in, or as remapped (a
range in the plan that collides with a range of this cluster is still
remapped, which only the controller knows).`

// peerFactFlags are the flags of the facts a peer's ranges are held to:
// the allowlist, the address plan for peers and the file of cluster-info
// that may carry both.
type peerFactFlags struct {
	allowed, routed []string
	clusterInfo     string
	set             *pflag.FlagSet
}

// register adds the flags to cmd.
func (f *peerFactFlags) register(cmd *cobra.Command) {
	f.set = cmd.Flags()
	f.set.StringSliceVar(&f.allowed, allowedPeerFlag, nil, "range the peer's CIDRs must lie in, as the controller's --allowed-peer-cidr (repeatable; default: allowedPeerCIDRs of --cluster-info, else "+rangepolicy.Format(rangepolicy.DefaultAllowed())+")")
	f.set.StringSliceVar(&f.routed, routedPeerFlag, nil, "range of this cluster's address plan for peers, as the controller's --routed-peer-cidr: the peer's ranges inside it are routed as they are, the others remapped (repeatable; default: routedPeerCIDRs of --cluster-info, else none)")
	f.set.StringVar(&f.clusterInfo, clusterInfoFlag, "", "this cluster's facts: a saved "+clusterinfo.Name+" ConfigMap or the output of peerlink info -o yaml; its allowedPeerCIDRs and routedPeerCIDRs apply where the flags give none")
}

// given returns the first of the flags that is set, with its dashes, or "".
func (f *peerFactFlags) given() string {
	for _, name := range []string{allowedPeerFlag, routedPeerFlag, clusterInfoFlag} {
		if f.set.Changed(name) {
			return "--" + name
		}
	}
	return ""
}

// peerFacts are the facts a peer's ranges are held to, resolved from the
// flags and the file.
type peerFacts struct {
	policy rangepolicy.Policy
	// info is the file's facts, with the lists the flags give in place of
	// its own; nil without --cluster-info.
	info *clusterinfo.Info
	// allowedFrom names where the allowlist comes from, for errors.
	allowedFrom string
	// planKnown says the plan was given, by flag or by the file: without
	// it, what is remapped here is not known.
	planKnown bool
}

// load reads the file, if any, and the flags, and checks the allowlist and
// the plan as the controller checks its own. Errors name the flag, or the
// file and its field.
func (f *peerFactFlags) load() (peerFacts, error) {
	var facts peerFacts
	facts.allowedFrom = "--" + allowedPeerFlag
	if f.clusterInfo != "" {
		info, err := peering.ReadInfoFile(f.clusterInfo)
		if err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				return peerFacts{}, fmt.Errorf("--%s %s: %w", clusterInfoFlag, f.clusterInfo, pathErr.Err)
			}
			// The reader's other errors begin with the file's name.
			return peerFacts{}, fmt.Errorf("--%s %w", clusterInfoFlag, err)
		}
		file := fmt.Sprintf("--%s %s: ", clusterInfoFlag, f.clusterInfo)
		if err := rangepolicy.Validate(info.AllowedPeer); err != nil {
			return peerFacts{}, fmt.Errorf("%s%s: %w", file, clusterinfo.KeyAllowedPeerCIDRs, err)
		}
		if err := rangepolicy.ValidateRouted(info.RoutedPeer); err != nil {
			return peerFacts{}, fmt.Errorf("%s%s: %w", file, clusterinfo.KeyRoutedPeerCIDRs, err)
		}
		facts.info = &info
		facts.policy = info.PeerPolicy()
		facts.allowedFrom = file + clusterinfo.KeyAllowedPeerCIDRs
		facts.planKnown = true
	}
	if f.set.Changed(allowedPeerFlag) {
		allowed, err := parseFlagRanges(allowedPeerFlag, f.allowed, rangepolicy.Validate)
		if err != nil {
			return peerFacts{}, err
		}
		facts.policy.Allowed = allowed
		facts.allowedFrom = "--" + allowedPeerFlag
	}
	if f.set.Changed(routedPeerFlag) {
		routed, err := parseFlagRanges(routedPeerFlag, f.routed, rangepolicy.ValidateRouted)
		if err != nil {
			return peerFacts{}, err
		}
		facts.policy.Routed = routed
		facts.planKnown = true
	}
	if facts.info != nil {
		facts.info.AllowedPeer, facts.info.RoutedPeer = facts.policy.Allowed, facts.policy.Routed
	}
	return facts, nil
}

// parseFlagRanges parses the ranges of the flag name and checks them with
// validate.
func parseFlagRanges(name string, values []string, validate func([]netip.Prefix) error) ([]netip.Prefix, error) {
	ranges, err := rangepolicy.ParseList(strings.Join(values, ","))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	if err := validate(ranges); err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	return ranges, nil
}
