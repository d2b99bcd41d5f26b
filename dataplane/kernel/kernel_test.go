package kernel

import (
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestKernel applies a small plan in a fresh network namespace: the tunnel
// step first and one log line of what changed, nothing written the second
// time, nothing at all when the tunnel step fails, the ip6 table gone when
// a plan has none, and all of it, both families' tables too, gone after
// Remove.
func TestKernel(t *testing.T) {
	if !netns.InNamespace(t) {
		return
	}
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	k, err := Open(overlay.Auto, log)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	remote := netip.MustParsePrefix("10.71.0.0/16")
	want := plan.NetNS{
		Overlay: plan.Overlay{Name: "plovltest", Kind: k.Overlay, Underlay: netip.MustParseAddr("192.0.2.10")},
		Routes: plan.Routing{
			Links:  []plan.Link{{Name: "plovltest", Router: true}},
			Routes: []plan.Route{{Table: 1899, Dst: remote, Unreachable: true}},
			Rules:  []plan.PolicyRule{{Priority: 1899, Table: 1899}},
			Tables: []int{1899}, RulePriorities: []int{1899},
		},
		NAT: plan.Ruleset{
			Table: "peerlink-agent-test",
			Sets:  []plan.Set{{Name: "remote", Prefixes: []netip.Prefix{remote}}},
			Chains: []plan.Chain{{Name: "post", Type: plan.NAT, Hook: plan.Postrouting, Priority: 99,
				Rules: []plan.Rule{{DstIn: "remote", SNATKeepSource: true}}}},
		},
		NAT6: plan.Ruleset{
			Table:  "peerlink-agent-test",
			Family: plan.IPv6,
			Sets:   []plan.Set{{Name: "remote", Prefixes: []netip.Prefix{netip.MustParsePrefix("fd00:71::/48")}}},
			Chains: []plan.Chain{{Name: "post", Type: plan.NAT, Hook: plan.Postrouting, Priority: 99,
				Rules: []plan.Rule{{DstIn: "remote", SNATKeepSource: true}}}},
		},
	}
	nftTables := func() string {
		t.Helper()
		out, err := exec.Command("nft", "list", "tables").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list tables: %v\n%s", err, out)
		}
		return string(out)
	}

	failed := errors.New("no tunnel")
	if err := k.Apply(want, func() (bool, error) { return false, failed }); !errors.Is(err, failed) {
		t.Fatalf("Apply with a failing tunnel = %v", err)
	}
	if _, err := k.Handle().LinkByName("plovltest"); err == nil {
		t.Error("the overlay link was made although the tunnel failed")
	}

	if err := k.Apply(want, func() (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "wireguard configuration written; overlay link plovltest created; ") ||
		!strings.Contains(lines[0], "rule 1899: from all lookup 1899: added") || !strings.HasSuffix(lines[0], `; nftables table peerlink-agent-test written; nftables table ip6 peerlink-agent-test written"`) {
		t.Fatalf("log after the first Apply:\n%s", strings.Join(lines, "\n"))
	}
	if err := k.Apply(want, nil); err != nil || len(lines) != 1 {
		t.Fatalf("second Apply = %v, logged %q; want nothing written", err, lines[1:])
	}
	if got := nftTables(); got != "table ip peerlink-agent-test\ntable ip6 peerlink-agent-test\n" {
		t.Fatalf("after Apply, tables are:\n%s", got)
	}

	// A plan without IPv6 leaves NAT6 unset: the ip6 table, named as NAT,
	// goes; the ip one stays as it was.
	noIP6 := want
	noIP6.NAT6 = plan.Ruleset{}
	if err := k.Apply(noIP6, nil); err != nil || len(lines) != 1 {
		t.Fatalf("Apply without NAT6 = %v, logged %q; want nothing written", err, lines[1:])
	}
	if got := nftTables(); got != "table ip peerlink-agent-test\n" {
		t.Errorf("after Apply without NAT6, tables are:\n%s", got)
	}
	// A NAT6 that forgets its family would be written over NAT.
	wrongFamily := want
	wrongFamily.NAT6.Family = ""
	if err := k.Apply(wrongFamily, nil); err == nil || !strings.Contains(err.Error(), "nftables table peerlink-agent-test of NAT6: family ip, want ip6") {
		t.Errorf("Apply of a NAT6 of family ip = %v", err)
	}
	if err := k.Apply(want, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(lines[len(lines)-1], `"nftables table ip6 peerlink-agent-test written"`) {
		t.Errorf("log after NAT6 came back:\n%s", strings.Join(lines, "\n"))
	}

	// What an agent removes when it stops names the ip6 table as
	// dataplane.owned does.
	owned := plan.NetNS{
		Overlay: want.Overlay, Routes: want.Routes,
		NAT:  plan.Ruleset{Table: want.NAT.Table},
		NAT6: plan.Ruleset{Table: want.NAT.Table, Family: plan.IPv6},
	}
	if err := k.Remove(owned); err != nil {
		t.Fatal(err)
	}
	if err := k.Remove(want); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if _, err := k.Handle().LinkByName("plovltest"); err == nil {
		t.Error("the overlay link is still there")
	}
	for _, args := range [][]string{{"ip", "rule"}, {"nft", "list", "tables"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if strings.Contains(string(out), "1899") || strings.Contains(string(out), "peerlink-agent-test") {
			t.Errorf("%v after Remove:\n%s", args, out)
		}
	}
}
