package nat

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Writes go through a transaction built by the nftables library, captured
// instead of sent, adjusted, and sent here. The adjustment is one the
// library cannot express: nft declares a map whose values are address
// ranges ("type ipv4_addr : interval ipv4_addr", what prefix NAT needs)
// with two userdata flags on the set. The kernel does not read them, but
// without them `nft list ruleset` cannot print the map nor the NAT rules
// that use it.

// nlaTypeMask strips the nested and byte-order flags from an attribute type.
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// transaction collects the messages of one nftables transaction.
type transaction struct {
	// Conn builds the messages; Flush captures them.
	*nftables.Conn
	msgs []netlink.Message
}

func newTransaction() (*transaction, error) {
	tx := &transaction{}
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		tx.msgs = append(tx.msgs, req...)
		return nil, nil
	}))
	if err != nil {
		return nil, fmt.Errorf("prepare nftables transaction: %w", err)
	}
	tx.Conn = c
	return tx, nil
}

// commit sends the captured transaction in the namespace ns (the current
// one when ns is netns.None()), after marking the maps named in
// intervalMaps as having interval data, and waits for every
// acknowledgement.
func (tx *transaction) commit(ns netns.NsHandle, intervalMaps map[string]bool) error {
	if err := tx.Flush(); err != nil {
		return fmt.Errorf("build nftables transaction: %w", err)
	}
	msgs := make([]netlink.Message, len(tx.msgs))
	for i, m := range tx.msgs {
		// Length, sequence number and port are those the capturing
		// connection filled in; the real one computes its own.
		m.Header.Length, m.Header.Sequence, m.Header.PID = 0, 0, 0
		if m.Header.Type == netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSET) {
			var err error
			if m.Data, err = markIntervalData(m.Data, intervalMaps); err != nil {
				return err
			}
		}
		msgs[i] = m
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
	sent, err := conn.SendMessages(msgs)
	if err != nil {
		return fmt.Errorf("send nftables transaction: %w", err)
	}
	want := 0
	for _, m := range sent {
		if m.Header.Flags&netlink.Acknowledge != 0 {
			want++
		}
	}
	var errs []error
	for got := 0; got < want; {
		replies, err := conn.Receive()
		if err != nil {
			// The kernel applies all of a transaction or none of it; the
			// first error is the reason.
			errs = append(errs, err)
			break
		}
		for _, r := range replies {
			if r.Header.Type == netlink.Error {
				got++
			}
		}
	}
	return errors.Join(errs...)
}

// markIntervalData adds to a NEWSET message for one of maps the userdata
// nft writes for interval values: data byte order big endian, data
// interval.
func markIntervalData(data []byte, maps map[string]bool) ([]byte, error) {
	const nfgenmsgLen = 4
	if len(data) < nfgenmsgLen {
		return nil, errors.New("short NEWSET message")
	}
	attrs, err := netlink.UnmarshalAttributes(data[nfgenmsgLen:])
	if err != nil {
		return nil, fmt.Errorf("parse NEWSET message: %w", err)
	}
	name := ""
	udata := -1
	for i, a := range attrs {
		switch a.Type & nlaTypeMask {
		case unix.NFTA_SET_NAME:
			name = string(a.Data[:len(a.Data)-1])
		case unix.NFTA_SET_USERDATA:
			udata = i
		}
	}
	if !maps[name] {
		return data, nil
	}
	var extra []byte
	extra = userdata.AppendUint32(extra, userdata.NFTNL_UDATA_SET_DATABYTEORDER, 2)
	extra = userdata.AppendUint32(extra, userdata.NFTNL_UDATA_SET_DATA_INTERVAL, 1)
	if udata >= 0 {
		attrs[udata].Data = append(attrs[udata].Data, extra...)
		// The length decoded with the attribute would be written back.
		attrs[udata].Length = 0
	} else {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_SET_USERDATA, Data: extra})
	}
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, fmt.Errorf("encode NEWSET message: %w", err)
	}
	return append(data[:nfgenmsgLen:nfgenmsgLen], b...), nil
}
