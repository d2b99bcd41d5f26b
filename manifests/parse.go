package manifests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
)

// KeyLength is the length of a WireGuard key in bytes.
const KeyLength = 32

// ParseCIDR parses a network in CIDR notation, refusing host bits
// (10.244.0.1/16), with an error that says the value is meant as a CIDR.
// It takes s as written, spaces included, as the controller does: what it
// accepts in a manifest is what the controller accepts. Lists given on the
// command line are trimmed by ParseCIDRList.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := cidr.ParseNetwork(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR: %w", err)
	}
	return p, nil
}

// ParseCIDRList parses CIDRs given as repeated values, each of which may be a
// comma-separated list, as flags and the cluster-info ConfigMap carry them.
// Empty items are skipped.
func ParseCIDRList(values ...string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range listItems(values) {
		p, err := ParseCIDR(item)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseAddressList reads the addresses of a gateway server (IPs or host
// names) given like ParseCIDRList's CIDRs, and checks each of them.
func ParseAddressList(values ...string) ([]string, error) {
	items := listItems(values)
	for _, item := range items {
		if err := ValidateAddress(item); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// listItems are the non-empty items of values, each of which may be a
// comma-separated list, without surrounding spaces.
func listItems(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// ParsePublicKey decodes a WireGuard public key written as `wg pubkey`
// prints it: the standard base64 of 32 bytes, in canonical form, not all
// zero. It takes s as written: a space or a line break around the key is
// refused, as the CRD's pattern refuses it (the CLI trims its flag).
func ParsePublicKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key is not base64: %w", err)
	}
	if len(key) != KeyLength {
		return nil, fmt.Errorf("public key is %d bytes, want %d", len(key), KeyLength)
	}
	// Two spellings of one key would make two keys to compare and to
	// trust: only the one wg pubkey prints is taken.
	if base64.StdEncoding.EncodeToString(key) != s {
		return nil, fmt.Errorf("public key %q is not in canonical form: want %s", s, base64.StdEncoding.EncodeToString(key))
	}
	if bytes.Count(key, []byte{0}) == KeyLength {
		return nil, fmt.Errorf("public key is all zero: no key")
	}
	return key, nil
}

// ValidatePort checks a TCP/UDP port number.
func ValidatePort(port int32) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is out of range 1-65535", port)
	}
	return nil
}

// ValidateMTU checks a tunnel MTU against the bounds the API accepts.
func ValidateMTU(mtu int) error {
	if mtu < netv1beta1.MinMTU || mtu > netv1beta1.MaxMTU {
		return fmt.Errorf("MTU %d is out of range %d-%d", mtu, netv1beta1.MinMTU, netv1beta1.MaxMTU)
	}
	return nil
}

// ValidateReplicas checks a gateway's number of pods against the bounds the
// API accepts.
func ValidateReplicas(n int32) error {
	if n < MinReplicas || n > MaxReplicas {
		return fmt.Errorf("%d replicas is out of range %d-%d", n, MinReplicas, MaxReplicas)
	}
	return nil
}

// Bounds of a gateway's replicas, as the CRD schema enforces them.
const (
	MinReplicas = 1
	MaxReplicas = 5
)
