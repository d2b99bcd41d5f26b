package route

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Indexes of IPv4 per-link settings (IPV4_DEVCONF_* in
// include/uapi/linux/ip.h), the same as the files under
// /proc/sys/net/ipv4/conf/<link>/.
const (
	devconfForwarding    = 1
	devconfSendRedirects = 6
	devconfRPFilter      = 8
	devconfAcceptLocal   = 23
)

// Nested attributes of IFLA_AF_SPEC for AF_INET.
const iflaInetConf = 1

// devconf is what the settings of l ask of its IPv4 settings.
func devconf(l plan.Link) map[int]uint32 {
	c := map[int]uint32{}
	if l.Router {
		c[devconfForwarding] = 1
		c[devconfSendRedirects] = 0
		c[devconfRPFilter] = 0
	}
	if l.AcceptLocal {
		c[devconfAcceptLocal] = 1
	}
	return c
}

// The settings are written over netlink (RTM_SETLINK with IFLA_INET_CONF)
// rather than /proc/sys, because a container that is not privileged sees
// /proc/sys read-only while CAP_NET_ADMIN is enough for netlink.

// inetConf reads the IPv4 settings of the link with the given index; the
// value of setting i is at index i-1.
func (a *Applier) inetConf(index int) ([]uint32, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, 0)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	msgs, err := a.exchange(req)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		conf, ok, err := nestedAttr(m.Data[unix.SizeofIfInfomsg:], unix.IFLA_AF_SPEC, unix.AF_INET, iflaInetConf)
		if err != nil {
			return nil, fmt.Errorf("parse link attributes: %w", err)
		}
		if !ok {
			continue
		}
		vals := make([]uint32, len(conf)/4)
		for i := range vals {
			vals[i] = nl.NativeEndian().Uint32(conf[4*i:])
		}
		return vals, nil
	}
	return nil, fmt.Errorf("link %d reports no IPv4 settings", index)
}

// nestedAttr follows a path of nested attributes from data, a run of route
// attributes, and returns the value of the last one, or false when one of
// them is missing.
func nestedAttr(data []byte, path ...int) ([]byte, bool, error) {
	for _, typ := range path {
		attrs, err := nl.ParseRouteAttr(data)
		if err != nil {
			return nil, false, err
		}
		i := slices.IndexFunc(attrs, func(a syscall.NetlinkRouteAttr) bool { return int(a.Attr.Type&nl.NLA_TYPE_MASK) == typ })
		if i < 0 {
			return nil, false, nil
		}
		data = attrs[i].Value
	}
	return data, true, nil
}

// setInetConf writes IPv4 settings of the link with the given index.
func (a *Applier) setInetConf(index int, conf map[int]uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC|unix.NLA_F_NESTED, nil)
	inet := spec.AddRtAttr(unix.AF_INET|unix.NLA_F_NESTED, nil)
	c := inet.AddRtAttr(iflaInetConf|unix.NLA_F_NESTED, nil)
	for k, v := range conf {
		var b [4]byte
		nl.NativeEndian().PutUint32(b[:], v)
		c.AddRtAttr(k, b[:])
	}
	req.AddData(spec)
	_, err := a.exchange(req)
	return err
}

// exchange sends req on a route netlink socket of the applier's namespace
// and returns the reply messages, or the error the kernel acknowledged.
func (a *Applier) exchange(req *nl.NetlinkRequest) ([]syscall.NetlinkMessage, error) {
	s, err := nl.GetNetlinkSocketAt(a.ns, a.cur, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open route netlink socket: %w", err)
	}
	defer s.Close()
	if err := s.Send(req); err != nil {
		return nil, fmt.Errorf("send netlink request: %w", err)
	}
	var out []syscall.NetlinkMessage
	for {
		msgs, _, err := s.Receive()
		if err != nil {
			return nil, fmt.Errorf("receive netlink reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != req.Seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, fmt.Errorf("short netlink error message")
				}
				if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return nil, syscall.Errno(-errno)
				}
				return out, nil
			case unix.NLMSG_DONE:
				return out, nil
			default:
				out = append(out, m)
				if m.Header.Flags&unix.NLM_F_MULTI == 0 && req.Flags&unix.NLM_F_ACK == 0 {
					return out, nil
				}
			}
		}
	}
}

// IPv6 per-link settings cannot be written over netlink: in IFLA_AF_SPEC
// for AF_INET6 the kernel accepts only the address token and the address
// generation mode, and answers IFLA_INET6_CONF with EINVAL. They are read
// and written under /proc/sys/net/ipv6/conf/, from a thread in the
// applier's namespace (/proc/sys/net shows the namespace of the thread
// that opens a file). In a container that is not privileged /proc/sys is
// read-only: the write fails there, and the namespace's IPv6 forwarding
// has to be set before, for instance through the pod's sysctls.
//
// The link's own forwarding setting does not make the kernel forward
// IPv6 (ip6_forward looks at net.ipv6.conf.all.forwarding); it makes the
// link act as a router in neighbor discovery. What forwards the packets
// arriving on one link is force_forwarding (Linux 6.17); without it, only
// all.forwarding, which turns every link into a router, so the applier
// leaves that one to whoever configures the namespace.
const ipv6Conf = "/proc/sys/net/ipv6/conf/"

// EnableIPv6Forwarding turns on IPv6 forwarding for the whole network
// namespace of the caller (net.ipv6.conf.all.forwarding), unless it is on
// already, and reports whether it wrote. It is what a privileged init
// container of a gateway pod runs, so that the gateway, which may not write
// /proc/sys, forwards IPv6.
func EnableIPv6Forwarding() (bool, error) {
	const key = ipv6Conf + "all/forwarding"
	v, err := os.ReadFile(key)
	if err != nil {
		return false, fmt.Errorf("read net.ipv6.conf.all.forwarding (is IPv6 on in this kernel?): %w", err)
	}
	if strings.TrimSpace(string(v)) == "1" {
		return false, nil
	}
	if err := os.WriteFile(key, []byte("1"), 0o644); err != nil {
		return false, fmt.Errorf("write net.ipv6.conf.all.forwarding: %w", err)
	}
	return true, nil
}

// forward6 turns on IPv6 forwarding of packets arriving on link and
// reports whether it wrote anything.
func (a *Applier) forward6(link string) (bool, error) {
	changed := false
	err := a.inNamespace(func() error {
		set := func(key string) error {
			v, err := os.ReadFile(ipv6Conf + key)
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(v)) == "1" {
				return nil
			}
			if err := os.WriteFile(ipv6Conf+key, []byte("1"), 0o644); err != nil {
				if errors.Is(err, syscall.EROFS) {
					return fmt.Errorf("IPv6 forwarding is off and /proc/sys is read-only here: set the sysctl net.ipv6.conf.all.forwarding=1 for this namespace (a pod's securityContext.sysctls, which the kubelet must allow): %w", err)
				}
				return fmt.Errorf("write net.ipv6.conf.%s: %w", strings.ReplaceAll(key, "/", "."), err)
			}
			changed = true
			return nil
		}
		// Forwarding for the whole namespace, set by whoever made it (a
		// pod's sysctls, a node's configuration), is all it takes: then
		// nothing is written, which an unprivileged pod could not.
		all, err := os.ReadFile(ipv6Conf + "all/forwarding")
		if err != nil || strings.TrimSpace(string(all)) == "1" {
			return err
		}
		if err := set(link + "/forwarding"); err != nil {
			return err
		}
		err = set(link + "/force_forwarding")
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("this kernel has no net.ipv6.conf.%s.force_forwarding (Linux 6.17) and net.ipv6.conf.all.forwarding is 0", link)
		}
		return err
	})
	return changed, err
}

// inNamespace runs f on a thread in the applier's namespace.
func (a *Applier) inNamespace(f func() error) error {
	if !a.ns.IsOpen() {
		return f()
	}
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine, so
		// that no other goroutine runs in the wrong namespace.
		runtime.LockOSThread()
		if err := netns.Set(a.ns); err != nil {
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
