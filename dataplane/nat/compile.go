package nat

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Offsets in the TCP header, and the TCP MSS option.
const (
	tcpFlagsOffset = 13
	dstPortOffset  = 2 // of UDP and TCP alike
	tcpFlagSYN     = 0x02
	tcpOptMaxseg   = 2
)

// reg1 is the 16-byte register rules load and compare in.
const reg1 = unix.NFT_REG_1

// family is what the nftables encoding of a ruleset takes from its address
// family.
type family struct {
	plan  plan.Family
	table nftables.TableFamily
	// nfproto is the family NAT expressions translate in.
	nfproto uint32
	// src and dst are the offsets of the addresses in the network header,
	// addrLen their length.
	src, dst, addrLen uint32
	// addrType is the key type of sets and maps; rangeType the data type
	// of a prefix map's values: a range of addresses stored as its first and
	// last address, which nft calls "interval ipv4_addr" or "interval
	// ipv6_addr" (see setUserData for the rest of that declaration).
	addrType, rangeType nftables.SetDatatype
	// rangeEnd is the register where a map lookup into reg1 puts the end
	// of the range: right after its start, the second 32-bit word of reg1
	// for IPv4, the next 16-byte register for IPv6 (as nft writes it).
	rangeEnd uint32
}

// addrRange is the data type of address ranges of a family, with the key
// type addr: twice its bytes, and its magic number, which is what nft reads
// (with the set's userdata) to print the type.
func addrRange(addr nftables.SetDatatype) nftables.SetDatatype {
	t := nftables.SetDatatype{Name: addr.Name, Bytes: 2 * addr.Bytes}
	t.SetNFTMagic(addr.GetNFTMagic())
	return t
}

// The families, by their IPv4 and IPv6 header layouts.
var (
	ipv4 = family{
		plan: plan.IPv4, table: nftables.TableFamilyIPv4, nfproto: unix.NFPROTO_IPV4,
		src: 12, dst: 16, addrLen: 4,
		addrType: nftables.TypeIPAddr, rangeType: addrRange(nftables.TypeIPAddr),
		rangeEnd: unix.NFT_REG32_01,
	}
	ipv6 = family{
		plan: plan.IPv6, table: nftables.TableFamilyIPv6, nfproto: unix.NFPROTO_IPV6,
		src: 8, dst: 24, addrLen: 16,
		addrType: nftables.TypeIP6Addr, rangeType: addrRange(nftables.TypeIP6Addr),
		rangeEnd: unix.NFT_REG_2,
	}
)

// familyOf is the encoding of the family f, IPv4 when f is unset.
func familyOf(f plan.Family) family {
	if f == plan.IPv6 {
		return ipv6
	}
	return ipv4
}

// ifname is an interface name as nftables compares it: NUL-padded to
// IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// fingerprint is stored in each rule's comment, so that a rule changed by
// hand is told apart from the one peerlink wrote. It is taken of the rule's
// syntax in its table's family; for family ip that is Rule.String, as in
// releases without ip6, so their tables match and are not rewritten.
func fingerprint(r plan.Rule, f family) string {
	sum := sha256.Sum256([]byte(r.Syntax(f.plan)))
	return hex.EncodeToString(sum[:4])
}

// ruleUserData is the comment stored with a rule of a table of family f.
func ruleUserData(r plan.Rule, f family) []byte {
	c := fmt.Sprintf("peerlink %s", fingerprint(r, f))
	if r.Comment != "" {
		c = r.Comment + " [" + fingerprint(r, f) + "]"
	}
	return userdata.AppendString(nil, userdata.TypeComment, c)
}

// compileRule returns the expressions of r in a table of family f. sets
// resolves set and map names.
func compileRule(r plan.Rule, f family, sets map[string]*nftables.Set) ([]expr.Any, error) {
	var ex []expr.Any
	lookupSet := func(name string) (*nftables.Set, error) {
		s, ok := sets[name]
		if !ok {
			return nil, fmt.Errorf("set %s is not in the ruleset", name)
		}
		return s, nil
	}
	loadAddr := func(offset uint32) *expr.Payload {
		return &expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: f.addrLen}
	}
	iface := func(key expr.MetaKey, name string, op expr.CmpOp) {
		ex = append(ex,
			&expr.Meta{Key: key, Register: reg1},
			&expr.Cmp{Op: op, Register: reg1, Data: ifname(name)})
	}
	if r.IIF != "" {
		iface(expr.MetaKeyIIFNAME, r.IIF, expr.CmpOpEq)
	}
	if r.NotIIF != "" {
		iface(expr.MetaKeyIIFNAME, r.NotIIF, expr.CmpOpNeq)
	}
	if r.OIF != "" {
		iface(expr.MetaKeyOIFNAME, r.OIF, expr.CmpOpEq)
	}
	for _, m := range []struct {
		offset uint32
		set    string
		invert bool
	}{
		{f.src, r.SrcIn, false}, {f.src, r.SrcNotIn, true},
		{f.dst, r.DstIn, false}, {f.dst, r.DstNotIn, true},
	} {
		if m.set == "" {
			continue
		}
		s, err := lookupSet(m.set)
		if err != nil {
			return nil, err
		}
		ex = append(ex,
			loadAddr(m.offset),
			&expr.Lookup{SourceRegister: reg1, SetName: s.Name, SetID: s.ID, Invert: m.invert})
	}
	if r.Src.IsValid() {
		ex = append(ex, loadAddr(f.src), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: r.Src.AsSlice()})
	}
	if r.Dst.IsValid() {
		ex = append(ex, loadAddr(f.dst), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: r.Dst.AsSlice()})
	}
	if r.DstLocal {
		// The fib expression writes the address type as a host-order
		// 32-bit integer.
		local := make([]byte, 4)
		binary.NativeEndian.PutUint32(local, unix.RTN_LOCAL)
		ex = append(ex,
			&expr.Fib{Register: reg1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: local})
	}
	if r.Established {
		established := make([]byte, 4)
		binary.NativeEndian.PutUint32(established, expr.CtStateBitESTABLISHED)
		ex = append(ex,
			&expr.Ct{Register: reg1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: established, Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 4)})
	}
	for _, m := range []struct {
		proto byte
		port  uint16
	}{{unix.IPPROTO_UDP, r.UDPDstPort}, {unix.IPPROTO_TCP, r.TCPDstPort}} {
		if m.port == 0 {
			continue
		}
		var port [2]byte
		binary.BigEndian.PutUint16(port[:], m.port)
		ex = append(ex,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{m.proto}},
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: dstPortOffset, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: port[:]})
	}
	if r.TCPSYN || r.ClampMSS != 0 {
		ex = append(ex,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{unix.IPPROTO_TCP}})
	}
	if r.TCPSYN {
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: tcpFlagsOffset, Len: 1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 1, Mask: []byte{tcpFlagSYN}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: []byte{0}})
	}
	prefixNAT := func(typ expr.NATType, offset uint32, name string) error {
		s, err := lookupSet(name)
		if err != nil {
			return err
		}
		ex = append(ex,
			loadAddr(offset),
			&expr.Lookup{SourceRegister: reg1, DestRegister: reg1, IsDestRegSet: true, SetName: s.Name, SetID: s.ID},
			&expr.NAT{Type: typ, Family: f.nfproto, RegAddrMin: reg1, RegAddrMax: f.rangeEnd, Prefix: true})
		return nil
	}
	switch {
	case r.DNATMap != "":
		if err := prefixNAT(expr.NATTypeDestNAT, f.dst, r.DNATMap); err != nil {
			return nil, err
		}
	case r.SNATMap != "":
		if err := prefixNAT(expr.NATTypeSourceNAT, f.src, r.SNATMap); err != nil {
			return nil, err
		}
	case r.SNATKeepSource:
		ex = append(ex,
			loadAddr(f.src),
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: f.nfproto, RegAddrMin: reg1})
	case r.SNATTo.IsValid():
		ex = append(ex,
			&expr.Immediate{Register: reg1, Data: r.SNATTo.AsSlice()},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: f.nfproto, RegAddrMin: reg1})
	case r.ClampMSS != 0:
		var mss [2]byte
		binary.BigEndian.PutUint16(mss[:], r.ClampMSS)
		ex = append(ex,
			&expr.Exthdr{Op: expr.ExthdrOpTcpopt, Type: tcpOptMaxseg, Offset: 2, Len: 2, DestRegister: reg1},
			&expr.Cmp{Op: expr.CmpOpGt, Register: reg1, Data: mss[:]},
			&expr.Immediate{Register: reg1, Data: mss[:]},
			&expr.Exthdr{Op: expr.ExthdrOpTcpopt, Type: tcpOptMaxseg, Offset: 2, Len: 2, SourceRegister: reg1})
	case r.Notrack:
		ex = append(ex, &expr.Notrack{})
	case r.Verdict != "":
		if r.Counter != "" {
			ex = append(ex, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: r.Counter})
		}
		kind := expr.VerdictAccept
		if r.Verdict == plan.Drop {
			kind = expr.VerdictDrop
		}
		ex = append(ex, &expr.Verdict{Kind: kind})
	default:
		return nil, fmt.Errorf("rule %q has no statement", r.Syntax(f.plan))
	}
	return ex, nil
}

// setElements returns the interval elements of a set: each prefix as its
// first address, and the address after its last as an interval end (none
// after the family's last address).
func setElements(ps []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range slices.SortedFunc(slices.Values(ps), netip.Prefix.Compare) {
		first, last := bounds(p)
		out = append(out, nftables.SetElement{Key: first.AsSlice()})
		if end := last.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// mapElements returns the interval elements of a prefix map: each key
// prefix carries the first and last address of its target prefix.
func mapElements(elems []plan.MapElement) []nftables.SetElement {
	byKey := map[netip.Prefix]netip.Prefix{}
	keys := make([]netip.Prefix, 0, len(elems))
	for _, e := range elems {
		byKey[e.From] = e.To
		keys = append(keys, e.From)
	}
	var out []nftables.SetElement
	for _, k := range slices.SortedFunc(slices.Values(keys), netip.Prefix.Compare) {
		first, last := bounds(k)
		tFirst, tLast := bounds(byKey[k])
		out = append(out, nftables.SetElement{Key: first.AsSlice(), Val: append(tFirst.AsSlice(), tLast.AsSlice()...)})
		if end := last.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// bounds returns the first and last address of a prefix of either family.
func bounds(p netip.Prefix) (netip.Addr, netip.Addr) {
	p = p.Masked()
	last := p.Addr().AsSlice()
	for i := p.Bits(); i < len(last)*8; i++ {
		last[i/8] |= 0x80 >> (i % 8)
	}
	l, _ := netip.AddrFromSlice(last)
	return p.Addr(), l
}
