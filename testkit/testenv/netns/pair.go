package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// Pair is a named network namespace joined to the host by a veth pair: the
// host end HostIf carries HostAddr, or joins the host bridge Bridge (which
// carries HostAddr) when that is set; the end inside the namespace is eth0
// and carries NodeAddr, and the namespace routes everything through
// HostAddr. With NodeAddr6 set, IPv6 goes the same way: eth0 carries
// NodeAddr6 too and routes IPv6 through HostAddr6, which the host end (or
// the bridge, when there is one) carries. It outlives the process that
// made it, as a lab's nodes do.
type Pair struct {
	Namespace string
	HostIf    string
	HostAddr  netip.Prefix
	NodeAddr  netip.Prefix
	Bridge    string
	// HostAddr6 and NodeAddr6 are the IPv6 twins of HostAddr and
	// NodeAddr; unset, the pair has no IPv6 address of its own.
	HostAddr6 netip.Prefix
	NodeAddr6 netip.Prefix
}

// Create makes the namespace, with lo up, and the veth pair, with the
// addresses and the default route. It fails when the namespace exists.
func (p Pair) Create() error {
	if Exists(p.Namespace) {
		return fmt.Errorf("network namespace %s: already exists", p.Namespace)
	}
	ns, err := add(p.Namespace)
	if err != nil {
		return err
	}
	defer ns.Close()
	host := []string{"ip", "addr", "add", p.HostAddr.String(), "dev", p.HostIf}
	if p.Bridge != "" {
		host = []string{"ip", "link", "set", p.HostIf, "master", p.Bridge}
	}
	cmds := [][]string{
		{"ip", "link", "add", p.HostIf, "type", "veth", "peer", "name", "eth0", "netns", p.Namespace},
		host,
		{"ip", "link", "set", p.HostIf, "up"},
		inside(p.Namespace, []string{"ip", "addr", "add", p.NodeAddr.String(), "dev", "eth0"}),
		inside(p.Namespace, []string{"ip", "link", "set", "eth0", "up"}),
		inside(p.Namespace, []string{"ip", "route", "add", "default", "via", p.HostAddr.Addr().String()}),
	}
	if p.NodeAddr6.IsValid() {
		// nodad: the addresses are the lab's own on a private link, and
		// duplicate address detection would hold them tentative (unusable)
		// for a second or more.
		if p.Bridge == "" {
			cmds = append(cmds, []string{"ip", "-6", "addr", "add", p.HostAddr6.String(), "dev", p.HostIf, "nodad"})
		}
		cmds = append(cmds,
			inside(p.Namespace, []string{"ip", "-6", "addr", "add", p.NodeAddr6.String(), "dev", "eth0", "nodad"}),
			inside(p.Namespace, []string{"ip", "-6", "route", "add", "default", "via", p.HostAddr6.Addr().String()}))
	}
	for _, argv := range cmds {
		if _, err := run(argv...); err != nil {
			return fmt.Errorf("network namespace %s: %w", p.Namespace, err)
		}
	}
	return nil
}

// HostIfExists reports whether the host end of the veth pair exists.
func (p Pair) HostIfExists() bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", p.HostIf))
	return err == nil
}

// Delete removes the host end of the veth pair and the namespace. Missing
// pieces are not an error, so Delete also cleans up after a partial Create.
func (p Pair) Delete() error {
	var errs []error
	if p.HostIfExists() {
		if _, err := run("ip", "link", "del", p.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, Remove(p.Namespace))...)
}
