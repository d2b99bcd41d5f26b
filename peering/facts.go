package peering

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// FactsInput says where the facts of this cluster a peer's ranges are held
// to come from: a saved cluster-info file (InfoFile: a ConfigMap, or what
// peerlink info -o yaml prints) and lists that win over the file's. A nil
// list is not given; an empty one is.
type FactsInput struct {
	InfoFile        string
	Allowed, Routed []string
}

// Facts are the facts a peer's ranges are held to, as the controller holds
// them.
type Facts struct {
	Policy rangepolicy.Policy
	// Info is the file's facts, with the lists given in place of its own;
	// nil without a file.
	Info *clusterinfo.Info
	// AllowedFromFile says the allowlist is the file's, not a list given.
	AllowedFromFile bool
	// PlanKnown says the plan was given, as a list or by the file: without
	// it, what is remapped here is not known.
	PlanKnown bool
}

// LoadFacts reads the file, if any, and the lists, and checks the allowlist
// and the plan as the controller checks its own. Errors are
// *field.Error naming InfoFile (with the file and its key), Allowed or
// Routed.
func LoadFacts(in FactsInput) (Facts, error) {
	var facts Facts
	if in.InfoFile != "" {
		info, err := ReadInfoFile(in.InfoFile)
		if err != nil {
			// The reader's errors begin with the file's name, or are the
			// file system's.
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				err = pathErr.Err
			} else if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			return Facts{}, field.New("InfoFile", in.InfoFile, err)
		}
		if err := rangepolicy.Validate(info.AllowedPeer); err != nil {
			return Facts{}, field.New("InfoFile", in.InfoFile, fmt.Errorf("%s: %w", clusterinfo.KeyAllowedPeerCIDRs, err))
		}
		if err := rangepolicy.ValidateRouted(info.RoutedPeer); err != nil {
			return Facts{}, field.New("InfoFile", in.InfoFile, fmt.Errorf("%s: %w", clusterinfo.KeyRoutedPeerCIDRs, err))
		}
		facts = Facts{Info: &info, Policy: info.PeerPolicy(), AllowedFromFile: true, PlanKnown: true}
	}
	if in.Allowed != nil {
		allowed, err := parseRanges("Allowed", in.Allowed, rangepolicy.Validate)
		if err != nil {
			return Facts{}, err
		}
		facts.Policy.Allowed, facts.AllowedFromFile = allowed, false
	}
	if in.Routed != nil {
		routed, err := parseRanges("Routed", in.Routed, rangepolicy.ValidateRouted)
		if err != nil {
			return Facts{}, err
		}
		facts.Policy.Routed, facts.PlanKnown = routed, true
	}
	if facts.Info != nil {
		facts.Info.AllowedPeer, facts.Info.RoutedPeer = facts.Policy.Allowed, facts.Policy.Routed
	}
	return facts, nil
}

// parseRanges parses the ranges of the field name, each value a comma-separated
// list, and checks them with validate.
func parseRanges(name string, values []string, validate func([]netip.Prefix) error) ([]netip.Prefix, error) {
	ranges, err := rangepolicy.ParseList(strings.Join(values, ","))
	if err == nil {
		err = validate(ranges)
	}
	if err != nil {
		return nil, field.New(name, "", err)
	}
	return ranges, nil
}
