package nat

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The nftables library reads the kernel's tables; writes are encoded here.
// The library cannot write what nft declares for a map whose values are
// address ranges ("type ipv4_addr : interval ipv4_addr", and the same of
// ipv6_addr: what prefix NAT needs): two userdata flags on the set. The kernel does not read them, but
// without them `nft list ruleset` cannot print the map nor the NAT rules
// that use it. The model stays the library's (Table, Chain, Set, SetElement,
// Rule, and the expressions of package expr, which encode themselves);
// only the messages are built here, with the attributes peerlink uses and
// no others.

// batch is one nftables transaction: messages the kernel receives between a
// batch begin and a batch end, and applies all of or none of.
//
// Like netlink.AttributeEncoder, it keeps the first encoding error and
// returns it from commit, so that a ruleset is written without a check per
// object.
type batch struct {
	msgs []netlink.Message
	// lastSetID numbers the sets created in the batch: a lookup refers to a
	// set of its own transaction by this ID as well as by name.
	lastSetID uint32
	err       error
}

// bigEndian is how nft's userdata spells the byte order of addresses
// (BYTEORDER_BIG_ENDIAN).
const bigEndian = 2

// nfgenmsg is the header that starts every nfnetlink message: address
// family, version, and a resource ID, which for the batch messages names
// the subsystem.
func nfgenmsg(family byte, resID uint16) []byte {
	h := []byte{family, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(h[2:], resID)
	return h
}

// add appends a message of type typ for the table family fam, whose
// attributes attrs encodes, asking for an acknowledgement. what names the
// object in an error.
func (b *batch) add(typ uint16, flags netlink.HeaderFlags, fam nftables.TableFamily, what string, attrs func(ae *netlink.AttributeEncoder)) {
	if b.err != nil {
		return
	}
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	attrs(ae)
	data, err := ae.Encode()
	if err != nil {
		b.err = fmt.Errorf("encode %s: %w", what, err)
		return
	}
	b.msgs = append(b.msgs, netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ),
			Flags: netlink.Request | netlink.Acknowledge | flags,
		},
		Data: append(nfgenmsg(byte(fam), 0), data...),
	})
}

// addTable creates the table t; in a batch that deleted it first, anew.
func (b *batch) addTable(t *nftables.Table) {
	b.add(unix.NFT_MSG_NEWTABLE, netlink.Create, t.Family, "table "+t.Name, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TABLE_NAME, t.Name)
		ae.Uint32(unix.NFTA_TABLE_FLAGS, 0)
	})
}

// delTable deletes the table with all it holds; it fails the batch when the
// table does not exist.
func (b *batch) delTable(t *nftables.Table) {
	b.add(unix.NFT_MSG_DELTABLE, 0, t.Family, "table "+t.Name, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_TABLE_NAME, t.Name)
	})
}

// addCounter creates the named counter o, starting from its Packets and
// Bytes.
func (b *batch) addCounter(o *nftables.CounterObj) {
	b.add(unix.NFT_MSG_NEWOBJ, netlink.Create, o.Table.Family, "counter "+o.Name, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_OBJ_TABLE, o.Table.Name)
		ae.String(unix.NFTA_OBJ_NAME, o.Name)
		ae.Uint32(unix.NFTA_OBJ_TYPE, unix.NFT_OBJECT_COUNTER)
		ae.Do(unix.NLA_F_NESTED|unix.NFTA_OBJ_DATA, func() ([]byte, error) {
			return expr.MarshalExprData(byte(o.Table.Family), &expr.Counter{Bytes: o.Bytes, Packets: o.Packets})
		})
	})
}

// addSet creates the set s, numbering it when it has no ID yet, and adds
// elems to it. Of s it encodes the name, the flags Interval and IsMap, and
// the key and data types. rangeValues declares a map's values intervals of
// its data type, as the values of a family's rangeType are.
func (b *batch) addSet(s *nftables.Set, elems []nftables.SetElement, rangeValues bool) {
	if s.ID == 0 {
		b.lastSetID++
		s.ID = b.lastSetID
	}
	var flags uint32
	if s.Interval {
		flags |= unix.NFT_SET_INTERVAL
	}
	if s.IsMap {
		flags |= unix.NFT_SET_MAP
	}
	what := "set " + s.Name
	b.add(unix.NFT_MSG_NEWSET, netlink.Create, s.Table.Family, what, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_SET_TABLE, s.Table.Name)
		ae.String(unix.NFTA_SET_NAME, s.Name)
		ae.Uint32(unix.NFTA_SET_FLAGS, flags)
		ae.Uint32(unix.NFTA_SET_KEY_TYPE, s.KeyType.GetNFTMagic())
		ae.Uint32(unix.NFTA_SET_KEY_LEN, s.KeyType.Bytes)
		ae.Uint32(unix.NFTA_SET_ID, s.ID)
		if s.IsMap {
			ae.Uint32(unix.NFTA_SET_DATA_TYPE, s.DataType.GetNFTMagic())
			ae.Uint32(unix.NFTA_SET_DATA_LEN, s.DataType.Bytes)
		}
		ae.Bytes(unix.NFTA_SET_USERDATA, setUserData(s.IsMap && rangeValues))
	})
	// The elements go in messages of at most elementsPerMessage: a
	// netlink attribute holds at most 64 KiB, which a list of a thousand
	// peers' ranges passes. The messages are of the same transaction.
	for chunk := range slices.Chunk(elems, elementsPerMessage) {
		b.add(unix.NFT_MSG_NEWSETELEM, netlink.Create, s.Table.Family, what, func(ae *netlink.AttributeEncoder) {
			ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, s.Table.Name)
			ae.String(unix.NFTA_SET_ELEM_LIST_SET, s.Name)
			ae.Uint32(unix.NFTA_SET_ELEM_LIST_SET_ID, s.ID)
			ae.Nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, func(list *netlink.AttributeEncoder) error {
				for _, e := range chunk {
					list.Nested(unix.NFTA_LIST_ELEM, func(elem *netlink.AttributeEncoder) error {
						encodeElement(elem, e)
						return nil
					})
				}
				return nil
			})
		})
	}
}

// elementsPerMessage is the most set elements one message adds: an
// element of an IPv6 map of ranges takes under 100 bytes encoded, so a
// message stays well within a netlink attribute's 64 KiB.
const elementsPerMessage = 256

// setUserData is what nft stores with a set and reads back to print its
// declaration: the byte order of the keys (addresses, so big endian) and,
// for a map of ranges, the byte order of the values and that they are
// intervals.
func setUserData(rangeValues bool) []byte {
	u := userdata.AppendUint32(nil, userdata.NFTNL_UDATA_SET_KEYBYTEORDER, bigEndian)
	if rangeValues {
		u = userdata.AppendUint32(u, userdata.NFTNL_UDATA_SET_DATABYTEORDER, bigEndian)
		u = userdata.AppendUint32(u, userdata.NFTNL_UDATA_SET_DATA_INTERVAL, 1)
	}
	return u
}

// encodeElement writes the key of e, whether it ends an interval, and its
// value when it has one.
func encodeElement(ae *netlink.AttributeEncoder, e nftables.SetElement) {
	value := func(typ uint16, v []byte) {
		ae.Nested(typ, func(nae *netlink.AttributeEncoder) error {
			nae.Bytes(unix.NFTA_DATA_VALUE, v)
			return nil
		})
	}
	value(unix.NFTA_SET_ELEM_KEY, e.Key)
	if e.IntervalEnd {
		ae.Uint32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
	}
	if len(e.Val) > 0 {
		value(unix.NFTA_SET_ELEM_DATA, e.Val)
	}
}

// addChain creates the chain c, a base chain when it has a hook and a
// priority.
func (b *batch) addChain(c *nftables.Chain) {
	b.add(unix.NFT_MSG_NEWCHAIN, netlink.Create, c.Table.Family, "chain "+c.Name, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_CHAIN_TABLE, c.Table.Name)
		ae.String(unix.NFTA_CHAIN_NAME, c.Name)
		if c.Hooknum != nil && c.Priority != nil {
			ae.Nested(unix.NFTA_CHAIN_HOOK, func(nae *netlink.AttributeEncoder) error {
				nae.Uint32(unix.NFTA_HOOK_HOOKNUM, uint32(*c.Hooknum))
				nae.Int32(unix.NFTA_HOOK_PRIORITY, int32(*c.Priority))
				return nil
			})
		}
		if c.Policy != nil {
			ae.Uint32(unix.NFTA_CHAIN_POLICY, uint32(*c.Policy))
		}
		if c.Type != "" {
			ae.String(unix.NFTA_CHAIN_TYPE, string(c.Type))
		}
	})
}

// addRule appends r to the end of its chain.
func (b *batch) addRule(r *nftables.Rule) {
	fam := r.Table.Family
	b.add(unix.NFT_MSG_NEWRULE, netlink.Create|netlink.Append, fam, "rule of chain "+r.Chain.Name, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.NFTA_RULE_TABLE, r.Table.Name)
		ae.String(unix.NFTA_RULE_CHAIN, r.Chain.Name)
		ae.Nested(unix.NFTA_RULE_EXPRESSIONS, func(list *netlink.AttributeEncoder) error {
			for _, e := range r.Exprs {
				list.Do(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, func() ([]byte, error) {
					return expr.Marshal(byte(fam), e)
				})
			}
			return nil
		})
		if len(r.UserData) > 0 {
			ae.Bytes(unix.NFTA_RULE_USERDATA, r.UserData)
		}
	})
}

// commit sends the batch in the namespace ns (the current one when ns is
// netns.None()) and waits for the kernel's answer to each message. The
// kernel applies the whole batch or, when any message fails, none of it.
func (b *batch) commit(ns netns.NsHandle) error {
	if b.err != nil {
		return b.err
	}
	if len(b.msgs) == 0 {
		return nil
	}
	cfg := &netlink.Config{}
	if ns.IsOpen() {
		cfg.NetNS = int(ns)
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return fmt.Errorf("open nftables netlink socket: %w", err)
	}
	defer conn.Close()
	msgs := b.framed()
	if err := fitTransaction(conn, msgs); err != nil {
		return err
	}
	if _, err := conn.SendMessages(msgs); err != nil {
		return fmt.Errorf("send nftables transaction: %w", err)
	}
	// Every message between begin and end asks for an acknowledgement,
	// which comes as an error message with error zero; an error message with
	// an errno makes Receive fail.
	for acked := 0; acked < len(b.msgs); {
		replies, err := conn.Receive()
		if err != nil {
			// The first error is the reason the kernel dropped the
			// transaction; what follows it adds nothing.
			return fmt.Errorf("nftables transaction: %w", err)
		}
		for _, r := range replies {
			if r.Header.Type == netlink.Error {
				acked++
			}
		}
	}
	return nil
}

// fitTransaction makes conn able to carry msgs as one transaction: the
// transaction is one datagram, which the socket's send buffer must hold
// (the default, about 200 KiB, holds a few thousand ranges), so a larger
// one gets a buffer of its size, forced past the system's maximum (the
// agents hold CAP_NET_ADMIN); and the kernel acknowledges each message
// with its header alone, not a copy of it.
func fitTransaction(conn *netlink.Conn, msgs []netlink.Message) error {
	if err := conn.SetOption(netlink.CapAcknowledge, true); err != nil {
		return fmt.Errorf("nftables netlink socket: %w", err)
	}
	size := 0
	for _, m := range msgs {
		size += (unix.SizeofNlMsghdr + len(m.Data) + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
	}
	if size <= defaultSendBuffer {
		return nil
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("nftables netlink socket: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2*size)
	}); err != nil {
		return fmt.Errorf("nftables netlink socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("nftables netlink socket: a send buffer of %d bytes for the transaction: %w", 2*size, serr)
	}
	return nil
}

// defaultSendBuffer is what a netlink socket's send buffer holds without
// being set: the usual net.core.wmem_default, less its bookkeeping.
const defaultSendBuffer = 160 << 10

// framed returns the messages between a batch begin and a batch end.
func (b *batch) framed() []netlink.Message {
	frame := func(typ uint16) netlink.Message {
		return netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
			Data:   nfgenmsg(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES),
		}
	}
	out := make([]netlink.Message, 0, len(b.msgs)+2)
	out = append(out, frame(unix.NFNL_MSG_BATCH_BEGIN))
	out = append(out, b.msgs...)
	return append(out, frame(unix.NFNL_MSG_BATCH_END))
}
