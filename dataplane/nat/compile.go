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

// Offsets in the IPv4 and TCP headers, and the TCP MSS option.
const (
	ipSrcOffset    = 12
	ipDstOffset    = 16
	tcpFlagsOffset = 13
	dstPortOffset  = 2 // of UDP and TCP alike
	tcpFlagSYN     = 0x02
	tcpOptMaxseg   = 2
)

// Registers: a 16-byte register for lookups, and the second 4-byte word of
// it, where an interval map's value (start, end) puts the range's end.
const (
	reg1      = unix.NFT_REG_1
	reg1Word2 = unix.NFT_REG32_01
)

// prefixRangeType is the data type of an interval map's values: a range of
// IPv4 addresses stored as its first and last address, which nft calls
// "interval ipv4_addr" (see setUserData for the rest of that
// declaration).
var prefixRangeType = func() nftables.SetDatatype {
	t := nftables.SetDatatype{Name: "ipv4_addr", Bytes: 8}
	t.SetNFTMagic(nftables.TypeIPAddr.GetNFTMagic())
	return t
}()

// ifname is an interface name as nftables compares it: NUL-padded to
// IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// fingerprint is stored in each rule's comment, so that a rule changed by
// hand is told apart from the one peerlink wrote.
func fingerprint(r plan.Rule) string {
	sum := sha256.Sum256([]byte(r.String()))
	return hex.EncodeToString(sum[:4])
}

// ruleUserData is the comment stored with a rule.
func ruleUserData(r plan.Rule) []byte {
	c := fmt.Sprintf("peerlink %s", fingerprint(r))
	if r.Comment != "" {
		c = r.Comment + " [" + fingerprint(r) + "]"
	}
	return userdata.AppendString(nil, userdata.TypeComment, c)
}

// compileRule returns the expressions of r. sets resolves set and map names.
func compileRule(r plan.Rule, sets map[string]*nftables.Set) ([]expr.Any, error) {
	var ex []expr.Any
	lookupSet := func(name string) (*nftables.Set, error) {
		s, ok := sets[name]
		if !ok {
			return nil, fmt.Errorf("set %s is not in the ruleset", name)
		}
		return s, nil
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
		{ipSrcOffset, r.SrcIn, false}, {ipSrcOffset, r.SrcNotIn, true},
		{ipDstOffset, r.DstIn, false}, {ipDstOffset, r.DstNotIn, true},
	} {
		if m.set == "" {
			continue
		}
		s, err := lookupSet(m.set)
		if err != nil {
			return nil, err
		}
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: m.offset, Len: 4},
			&expr.Lookup{SourceRegister: reg1, SetName: s.Name, SetID: s.ID, Invert: m.invert})
	}
	addrIs := func(offset uint32, a netip.Addr) {
		b := a.As4()
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: b[:]})
	}
	if r.Src.IsValid() {
		addrIs(ipSrcOffset, r.Src)
	}
	if r.Dst.IsValid() {
		addrIs(ipDstOffset, r.Dst)
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
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Lookup{SourceRegister: reg1, DestRegister: reg1, IsDestRegSet: true, SetName: s.Name, SetID: s.ID},
			&expr.NAT{Type: typ, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1, RegAddrMax: reg1Word2, Prefix: true})
		return nil
	}
	switch {
	case r.DNATMap != "":
		if err := prefixNAT(expr.NATTypeDestNAT, ipDstOffset, r.DNATMap); err != nil {
			return nil, err
		}
	case r.SNATMap != "":
		if err := prefixNAT(expr.NATTypeSourceNAT, ipSrcOffset, r.SNATMap); err != nil {
			return nil, err
		}
	case r.SNATKeepSource:
		ex = append(ex,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: ipSrcOffset, Len: 4},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1})
	case r.SNATTo.IsValid():
		a := r.SNATTo.As4()
		ex = append(ex,
			&expr.Immediate{Register: reg1, Data: a[:]},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1})
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
		return nil, fmt.Errorf("rule %q has no statement", r)
	}
	return ex, nil
}

// setElements returns the interval elements of a set: each prefix as its
// first address, and the address after its last as an interval end.
func setElements(ps []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range slices.SortedFunc(slices.Values(ps), netip.Prefix.Compare) {
		first, last := bounds(p)
		a := first.As4()
		out = append(out, nftables.SetElement{Key: a[:]})
		if end := last.Next(); end.IsValid() {
			e := end.As4()
			out = append(out, nftables.SetElement{Key: e[:], IntervalEnd: true})
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
		a, tf, tl := first.As4(), tFirst.As4(), tLast.As4()
		out = append(out, nftables.SetElement{Key: a[:], Val: append(tf[:], tl[:]...)})
		if end := last.Next(); end.IsValid() {
			e := end.As4()
			out = append(out, nftables.SetElement{Key: e[:], IntervalEnd: true})
		}
	}
	return out
}

// bounds returns the first and last address of a prefix.
func bounds(p netip.Prefix) (netip.Addr, netip.Addr) {
	p = p.Masked()
	first := p.Addr().As4()
	v := binary.BigEndian.Uint32(first[:])
	// For /0 the shift yields 0 and the subtraction wraps to all ones.
	v |= uint32(1)<<(32-p.Bits()) - 1
	var last [4]byte
	binary.BigEndian.PutUint32(last[:], v)
	return p.Addr(), netip.AddrFrom4(last)
}
