package nat

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// nftMsg is the netlink type of the nftables message msg.
func nftMsg(msg uint16) netlink.HeaderType {
	return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msg)
}

// wantSetUserData is, by set name, the userdata nft writes for the sets and
// the map of natRuleset: the byte order of the keys, and for the map of
// ranges the byte order of its values and that they are intervals.
var wantSetUserData = map[string]map[userdata.Type]uint32{
	"pods":   {userdata.NFTNL_UDATA_SET_KEYBYTEORDER: bigEndian},
	"remote": {userdata.NFTNL_UDATA_SET_KEYBYTEORDER: bigEndian},
	"to_real": {
		userdata.NFTNL_UDATA_SET_KEYBYTEORDER:  bigEndian,
		userdata.NFTNL_UDATA_SET_DATABYTEORDER: bigEndian,
		userdata.NFTNL_UDATA_SET_DATA_INTERVAL: 1,
	},
}

// checkSetUserData compares the userdata u of set name with
// wantSetUserData.
func checkSetUserData(t *testing.T, name string, u []byte) {
	t.Helper()
	want, ok := wantSetUserData[name]
	if !ok {
		t.Errorf("unexpected set %s", name)
		return
	}
	for _, typ := range []userdata.Type{
		userdata.NFTNL_UDATA_SET_KEYBYTEORDER,
		userdata.NFTNL_UDATA_SET_DATABYTEORDER,
		userdata.NFTNL_UDATA_SET_DATA_INTERVAL,
	} {
		got, has := userdata.GetUint32(u, typ)
		w, wantHas := want[typ]
		if has != wantHas || got != w {
			t.Errorf("set %s: userdata %d = %d (present %v), want %d (present %v)", name, typ, got, has, w, wantHas)
		}
	}
}

// setAttrs decodes the name, ID and userdata of a NEWSET message.
func setAttrs(t *testing.T, data []byte) (name string, id uint32, udata []byte) {
	t.Helper()
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		t.Fatal(err)
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_NAME:
			name = ad.String()
		case unix.NFTA_SET_ID:
			id = ad.Uint32()
		case unix.NFTA_SET_USERDATA:
			udata = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return name, id, udata
}

// TestBatchMessages checks the transaction written for natRuleset over a
// table that exists: one batch, every message acknowledged, the old table
// deleted first, each set numbered apart and filled by that number, and the
// userdata nft reads to print the sets and the map.
func TestBatchMessages(t *testing.T) {
	rs := natRuleset()
	table := &nftables.Table{Name: rs.Table, Family: nftables.TableFamilyIPv4}
	b := &batch{}
	b.delTable(table)
	if err := write(b, table, ipv4, rs); err != nil {
		t.Fatal(err)
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	msgs := b.framed()
	first, last := msgs[0], msgs[len(msgs)-1]
	if first.Header.Type != unix.NFNL_MSG_BATCH_BEGIN || last.Header.Type != unix.NFNL_MSG_BATCH_END {
		t.Fatalf("batch framed by types %d and %d, want begin and end", first.Header.Type, last.Header.Type)
	}
	for _, m := range []netlink.Message{first, last} {
		if string(m.Data) != string(nfgenmsg(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)) {
			t.Errorf("batch message %d names subsystem % x, want nftables", m.Header.Type, m.Data)
		}
	}
	inner := msgs[1 : len(msgs)-1]
	var types []netlink.HeaderType
	setIDs := map[uint32]string{}
	for i, m := range inner {
		types = append(types, m.Header.Type)
		if m.Header.Flags&(netlink.Request|netlink.Acknowledge) != netlink.Request|netlink.Acknowledge {
			t.Errorf("message %d (type %d) does not ask for an acknowledgement", i, m.Header.Type)
		}
		if m.Data[0] != byte(nftables.TableFamilyIPv4) {
			t.Errorf("message %d is of family %d, want ip", i, m.Data[0])
		}
		if m.Header.Type != nftMsg(unix.NFT_MSG_NEWSET) {
			continue
		}
		name, id, u := setAttrs(t, m.Data)
		if other, ok := setIDs[id]; ok || id == 0 {
			t.Errorf("set %s has ID %d, as has %q", name, id, other)
		}
		setIDs[id] = name
		checkSetUserData(t, name, u)
		next := inner[i+1]
		ad, err := netlink.NewAttributeDecoder(next.Data[4:])
		if err != nil {
			t.Fatal(err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_SET_ELEM_LIST_SET_ID && ad.Uint32() != id {
				t.Errorf("elements of set %s name set ID %d, want %d", name, ad.Uint32(), id)
			}
		}
	}
	want := []netlink.HeaderType{nftMsg(unix.NFT_MSG_DELTABLE), nftMsg(unix.NFT_MSG_NEWTABLE)}
	for range 3 {
		want = append(want, nftMsg(unix.NFT_MSG_NEWSET), nftMsg(unix.NFT_MSG_NEWSETELEM))
	}
	for _, ch := range rs.Chains {
		want = append(want, nftMsg(unix.NFT_MSG_NEWCHAIN))
		for range ch.Rules {
			want = append(want, nftMsg(unix.NFT_MSG_NEWRULE))
		}
	}
	if len(types) != len(want) {
		t.Fatalf("message types %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Errorf("message %d is of type %#x, want %#x", i, types[i], want[i])
		}
	}
}

// TestBatchKeepsFirstError checks that an object that cannot be encoded
// fails the commit, naming the object, before anything is sent.
func TestBatchKeepsFirstError(t *testing.T) {
	b := &batch{}
	b.addTable(&nftables.Table{Name: strings.Repeat("x", 1<<16), Family: nftables.TableFamilyIPv4})
	b.addTable(&nftables.Table{Name: "fine", Family: nftables.TableFamilyIPv4})
	err := b.commit(vnetns.None())
	if err == nil || !strings.Contains(err.Error(), "encode table xxx") {
		t.Fatalf("commit = %v, want the encoding error of the first table", err)
	}
	if len(b.msgs) != 0 {
		t.Errorf("%d messages were added after the error", len(b.msgs))
	}
}

// applierInNewNetns returns a fresh namespace, deleted when the test ends,
// and an applier for it; it skips the test without root.
func applierInNewNetns(t *testing.T, prefix string) (*netns.NS, *Applier) {
	t.Helper()
	netns.RequirePrivileged(t)
	ns := netns.New(t, prefix)
	a, err := NewApplier(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	return ns, a
}

// kernelSetUserData reads the userdata of each set of table in the
// namespace ns straight from the kernel.
func kernelSetUserData(t *testing.T, ns *netns.NS, table string) map[string][]byte {
	t.Helper()
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(ns.Handle)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_TABLE, table)
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	replies, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: nftMsg(unix.NFT_MSG_GETSET), Flags: netlink.Request | netlink.Dump},
		Data:   append(nfgenmsg(byte(nftables.TableFamilyIPv4), 0), attrs...),
	})
	if err != nil {
		t.Fatalf("dump sets of table ip %s: %v", table, err)
	}
	out := map[string][]byte{}
	for _, r := range replies {
		name, _, u := setAttrs(t, r.Data)
		out[name] = u
	}
	return out
}

// TestMapsCarryIntervalData checks that the kernel holds the userdata of
// each set as written, and that nft, which reads it, prints the map of
// ranges and the prefix NAT rule that uses it.
func TestMapsCarryIntervalData(t *testing.T) {
	ns, a := applierInNewNetns(t, "natud")
	rs := natRuleset()
	if _, err := a.Apply(rs); err != nil {
		t.Fatal(err)
	}
	got := kernelSetUserData(t, ns, rs.Table)
	if len(got) != len(wantSetUserData) {
		t.Errorf("kernel holds sets %v, want those of %v", got, wantSetUserData)
	}
	for name, u := range got {
		checkSetUserData(t, name, u)
	}
	listing := ns.MustRun(t, "nft", "list", "ruleset")
	for _, want := range []string{
		"map to_real {\n\t\ttype ipv4_addr : interval ipv4_addr\n\t\tflags interval\n",
		"elements = { 10.71.0.0/16 : 10.244.0.0/16, 10.72.0.0/24 : 10.70.0.0/24 }",
		`iifname != "peerlink-tunnel" dnat ip prefix to ip daddr map @to_real`,
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("nft listing lacks %q:\n%s", want, listing)
		}
	}
}

// TestFailedApplyChangesNothing writes a ruleset the kernel rejects at its
// last chain, after the old table was deleted and the new one and its sets
// created in the same transaction: the kernel drops all of it, so the table
// written before stays as it was, and where there was none, none appears.
func TestFailedApplyChangesNothing(t *testing.T) {
	// A NAT chain cannot hook forward; plan.Validate does not know it.
	rejected := func() plan.Ruleset {
		rs := natRuleset()
		rs.Maps[0].Elements = rs.Maps[0].Elements[:1]
		rs.Chains = append(rs.Chains, plan.Chain{Name: "late", Type: plan.NAT, Hook: plan.Forward, Rules: []plan.Rule{
			{SNATKeepSource: true},
		}})
		return rs
	}
	if err := rejected().Validate(); err != nil {
		t.Fatalf("the rejected ruleset must pass Validate, to reach the kernel: %v", err)
	}

	ns, a := applierInNewNetns(t, "natfail")
	if changed, err := a.Apply(rejected()); err == nil || changed {
		t.Fatalf("Apply of a ruleset the kernel rejects = %v, %v; want an error", changed, err)
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); tables != "" {
		t.Errorf("a failed first Apply left tables:\n%s", tables)
	}

	rs := natRuleset()
	if _, err := a.Apply(rs); err != nil {
		t.Fatal(err)
	}
	before := ns.MustRun(t, "nft", "list", "ruleset")
	changed, err := a.Apply(rejected())
	if err == nil || changed {
		t.Fatalf("Apply of a ruleset the kernel rejects = %v, %v; want an error", changed, err)
	}
	if !strings.Contains(err.Error(), "write table ip "+rs.Table) {
		t.Errorf("error %q does not name the table", err)
	}
	if after := ns.MustRun(t, "nft", "list", "ruleset"); after != before {
		t.Errorf("a failed Apply changed the ruleset:\n%s\nthen:\n%s", before, after)
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Errorf("Apply of the ruleset written before the failure = %v, %v; want no write", changed, err)
	}
}

// TestApplyLargeSets: sets and maps of thousands of ranges, more than one
// netlink message's attribute holds, are written in one transaction, read
// back equal (so not written again), and hold every range.
func TestApplyLargeSets(t *testing.T) {
	rs := natRuleset()
	rs.Sets[1].Prefixes, rs.Maps[0].Elements = nil, nil
	for i := range 3000 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i % 256), 0}), 24)
		rs.Sets[1].Prefixes = append(rs.Sets[1].Prefixes, p)
		rs.Maps[0].Elements = append(rs.Maps[0].Elements, plan.MapElement{From: p, To: netip.MustParsePrefix("10.244.0.0/24")})
	}
	ns, a := applierInNewNetns(t, "natlarge")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply of 3,000 ranges = %v, %v", changed, err)
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Errorf("Apply of the same ranges again = %v, %v; want no write", changed, err)
	}
	set := ns.MustRun(t, "nft", "list", "set", "ip", rs.Table, "remote")
	for _, want := range []string{"10.100.0.0/24", "10.111.183.0/24"} {
		if !strings.Contains(set, want) {
			t.Errorf("set remote lacks %s", want)
		}
	}
}
