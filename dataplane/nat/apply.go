package nat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Applier writes rulesets into the nftables of one network namespace.
type Applier struct {
	// conn reads the kernel's tables; writes go through a batch.
	conn *nftables.Conn
	ns   netns.NsHandle
}

// NewApplier returns an applier for the namespace ns, or for the current one
// when ns is netns.None().
func NewApplier(ns netns.NsHandle) (*Applier, error) {
	var opts []nftables.ConnOption
	if ns.IsOpen() {
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables connection: %w", err)
	}
	return &Applier{conn: c, ns: ns}, nil
}

// Apply makes the kernel's table rs.Table, of the ruleset's family, equal
// to rs. When the table
// differs in anything (missing, flushed, a rule edited by hand, other set
// elements) it is deleted and written anew in a single transaction, so
// packets see either the old or the new ruleset; when it matches nothing is
// written. It reports whether it wrote.
func (a *Applier) Apply(rs plan.Ruleset) (bool, error) {
	if err := rs.Validate(); err != nil {
		return false, err
	}
	f := familyOf(rs.Family)
	table := &nftables.Table{Name: rs.Table, Family: f.table}
	have, err := a.lookUp(rs.Table, f)
	if err != nil {
		return false, err
	}
	b := &batch{}
	if have != nil {
		same, err := a.matches(table, tableUse(have), f, rs)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
		b.delTable(table)
	}
	if err := write(b, table, f, rs); err != nil {
		return false, err
	}
	if err := b.commit(a.ns); err != nil {
		return false, fmt.Errorf("write table %s %s: %w", f.plan, rs.Table, err)
	}
	return true, nil
}

// lookUp returns the kernel's table name of family f, or nil when it has
// none.
func (a *Applier) lookUp(name string, f family) (*nftables.Table, error) {
	t, err := a.conn.ListTableOfFamily(name, f.table)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up table %s %s: %w", f.plan, name, err)
	}
	return t, nil
}

// write adds to b the messages that create rs as table, of family f. It
// returns the errors of compiling rules; b keeps those of encoding
// messages.
func write(b *batch, table *nftables.Table, f family, rs plan.Ruleset) error {
	b.addTable(table)
	for _, name := range rs.Counters {
		b.addCounter(&nftables.CounterObj{Table: table, Name: name})
	}
	sets := map[string]*nftables.Set{}
	for _, s := range rs.Sets {
		set := &nftables.Set{Table: table, Name: s.Name, KeyType: f.addrType, Interval: true}
		b.addSet(set, setElements(s.Prefixes), false)
		sets[s.Name] = set
	}
	for _, m := range rs.Maps {
		set := &nftables.Set{Table: table, Name: m.Name, KeyType: f.addrType, DataType: f.rangeType, IsMap: true, Interval: true}
		b.addSet(set, mapElements(m.Elements), true)
		sets[m.Name] = set
	}
	for _, ch := range rs.Chains {
		policy := nftables.ChainPolicyAccept
		prio := nftables.ChainPriority(ch.Priority)
		chain := &nftables.Chain{
			Name:     ch.Name,
			Table:    table,
			Type:     nftables.ChainType(ch.Type),
			Hooknum:  hookNum(ch.Hook),
			Priority: &prio,
			Policy:   &policy,
		}
		b.addChain(chain)
		for i, r := range ch.Rules {
			ex, err := compileRule(r, f, sets)
			if err != nil {
				return fmt.Errorf("table %s %s: chain %s: rule %d: %w", f.plan, rs.Table, ch.Name, i, err)
			}
			b.addRule(&nftables.Rule{Table: table, Chain: chain, Exprs: ex, UserData: ruleUserData(r, f)})
		}
	}
	return nil
}

func hookNum(h plan.Hook) *nftables.ChainHook {
	switch h {
	case plan.Prerouting:
		return nftables.ChainHookRef(unix.NF_INET_PRE_ROUTING)
	case plan.Forward:
		return nftables.ChainHookRef(unix.NF_INET_FORWARD)
	default:
		return nftables.ChainHookRef(unix.NF_INET_POST_ROUTING)
	}
}

// tableUse is the table's count of what it holds. The library reads the
// attribute, which the kernel sends in network order, in the host's order:
// its bytes are put back as they came and read in network order.
func tableUse(t *nftables.Table) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], t.Use)
	return binary.BigEndian.Uint32(b[:])
}

// matches compares the kernel's table with rs: chains with their hooks and
// priorities, each rule by the fingerprint in its comment, each set and map
// element by element. use is the table's count of what it holds (chains,
// sets and maps, named objects), as the kernel reports it.
//
// It reads this table only: each chain of rs by name, and the number of
// chains from use. Listing the family's chains instead would read every
// other table's too, on a node those of kube-proxy (through iptables-nft,
// one chain per Service and per endpoint: 200,000 chains at 100,000
// endpoints), at every sync.
func (a *Applier) matches(table *nftables.Table, use uint32, f family, rs plan.Ruleset) (bool, error) {
	if int(use) != len(rs.Chains)+len(rs.Sets)+len(rs.Maps)+len(rs.Counters) {
		return false, nil
	}
	for _, want := range rs.Chains {
		// The library hides the kernel's error number of a chain it
		// cannot read: a missing chain and a failed read both lead to
		// writing the table anew, whose own errors are reported.
		c, err := a.conn.ListChain(table, want.Name)
		if err != nil {
			return false, nil
		}
		if c.Type != nftables.ChainType(want.Type) || c.Hooknum == nil || *c.Hooknum != *hookNum(want.Hook) ||
			c.Priority == nil || int(*c.Priority) != want.Priority {
			return false, nil
		}
		rules, err := a.conn.GetRules(table, c)
		if err != nil {
			return false, fmt.Errorf("list rules of chain %s in table %s %s: %w", c.Name, f.plan, rs.Table, err)
		}
		if len(rules) != len(want.Rules) {
			return false, nil
		}
		for j, r := range rules {
			if !bytes.Equal(r.UserData, ruleUserData(want.Rules[j], f)) {
				return false, nil
			}
		}
	}
	counters, err := a.Counters(rs.Table, f.plan)
	if err != nil {
		return false, err
	}
	if len(counters) != len(rs.Counters) {
		return false, nil
	}
	for _, name := range rs.Counters {
		if _, ok := counters[name]; !ok {
			return false, nil
		}
	}
	sets, err := a.conn.GetSets(table)
	if err != nil {
		return false, fmt.Errorf("list sets of table %s %s: %w", f.plan, rs.Table, err)
	}
	if len(sets) != len(rs.Sets)+len(rs.Maps) {
		return false, nil
	}
	wantElems := map[string][]nftables.SetElement{}
	for _, s := range rs.Sets {
		wantElems[s.Name] = setElements(s.Prefixes)
	}
	for _, m := range rs.Maps {
		wantElems[m.Name] = mapElements(m.Elements)
	}
	for _, s := range sets {
		want, ok := wantElems[s.Name]
		if !ok {
			return false, nil
		}
		got, err := a.conn.GetSetElements(s)
		if err != nil {
			return false, fmt.Errorf("list elements of set %s in table %s %s: %w", s.Name, f.plan, rs.Table, err)
		}
		if !sameElements(got, want) {
			return false, nil
		}
	}
	return true, nil
}

func sameElements(got, want []nftables.SetElement) bool {
	if len(got) != len(want) {
		return false
	}
	key := func(e nftables.SetElement) string {
		end := "0"
		if e.IntervalEnd {
			end = "1"
		}
		return string(e.Key) + end + string(e.Val)
	}
	g := make([]string, len(got))
	w := make([]string, len(want))
	for i := range got {
		g[i], w[i] = key(got[i]), key(want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// Counters returns the packets counted so far in each named counter of
// the table of family fam (IPv4 when unset), which must exist. A table
// written anew starts its counters from zero.
func (a *Applier) Counters(table string, fam plan.Family) (map[string]uint64, error) {
	f := familyOf(fam)
	objs, err := a.conn.GetObjects(&nftables.Table{Name: table, Family: f.table})
	if err != nil {
		return nil, fmt.Errorf("list counters of table %s %s: %w", f.plan, table, err)
	}
	out := map[string]uint64{}
	for _, o := range objs {
		if c, ok := o.(*nftables.CounterObj); ok {
			out[c.Name] = c.Packets
		}
	}
	return out, nil
}

// Remove deletes the table name of family fam (IPv4 when unset) if it
// exists; a table of the same name in the other family stays.
func (a *Applier) Remove(name string, fam plan.Family) error {
	f := familyOf(fam)
	have, err := a.lookUp(name, f)
	if err != nil || have == nil {
		return err
	}
	b := &batch{}
	b.delTable(&nftables.Table{Name: name, Family: f.table})
	if err := b.commit(a.ns); err != nil {
		return fmt.Errorf("delete table %s %s: %w", f.plan, name, err)
	}
	return nil
}
