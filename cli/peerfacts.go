package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/peering"
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

// peerFactFlags are the flags of the facts a peer's ranges are held to,
// by the field of peering.FactsInput each fills.
type peerFactFlags struct {
	in  peering.FactsInput
	set *pflag.FlagSet
}

var peerFactFlagNames = map[string]string{"InfoFile": "--cluster-info", "Allowed": "--allowed-peer-cidr", "Routed": "--routed-peer-cidr"}

// register adds the flags to cmd.
func (f *peerFactFlags) register(cmd *cobra.Command) {
	f.set = cmd.Flags()
	f.set.StringSliceVar(&f.in.Allowed, "allowed-peer-cidr", nil, "range the peer's CIDRs must lie in, as the controller's --allowed-peer-cidr (repeatable; default: allowedPeerCIDRs of --cluster-info, else "+rangepolicy.Format(rangepolicy.DefaultAllowed())+")")
	f.set.StringSliceVar(&f.in.Routed, "routed-peer-cidr", nil, "range of this cluster's address plan for peers, as the controller's --routed-peer-cidr: the peer's ranges inside it are routed as they are, the others remapped (repeatable; default: routedPeerCIDRs of --cluster-info, else none)")
	f.set.StringVar(&f.in.InfoFile, "cluster-info", "", "this cluster's facts: a saved "+clusterinfo.Name+" ConfigMap or the output of peerlink info -o yaml; its allowedPeerCIDRs and routedPeerCIDRs apply where the flags give none")
}

// given returns the first of the flags that is set, with its dashes, or "".
func (f *peerFactFlags) given() string {
	for _, field := range []string{"Allowed", "Routed", "InfoFile"} {
		if name := peerFactFlagNames[field]; f.set.Changed(name[2:]) {
			return name
		}
	}
	return ""
}

// load reads the file, if any, and the flags. Errors name the flag, or the
// file and its field; allowedFrom names where the allowlist comes from.
func (f *peerFactFlags) load() (facts peering.Facts, allowedFrom string, err error) {
	in := f.in
	// A flag given empty is an empty list, one not given none.
	for field, list := range map[string]*[]string{"Allowed": &in.Allowed, "Routed": &in.Routed} {
		if f.set.Changed(peerFactFlagNames[field][2:]) && *list == nil {
			*list = []string{}
		}
	}
	facts, err = peering.LoadFacts(in)
	if err != nil {
		return facts, "", field.WithFlags(err, peerFactFlagNames)
	}
	allowedFrom = "--allowed-peer-cidr"
	if facts.AllowedFromFile {
		allowedFrom = "--cluster-info " + in.InfoFile + ": " + clusterinfo.KeyAllowedPeerCIDRs
	}
	return facts, allowedFrom, nil
}
