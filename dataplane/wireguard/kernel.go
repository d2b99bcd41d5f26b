package wireguard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// linkKind is the netlink kind of a kernel WireGuard link.
const linkKind = "wireguard"

// kernelDevice is a link of type wireguard, configured over generic netlink.
type kernelDevice struct {
	name   string
	client *wgctrl.Client
}

// KernelAvailable reports whether this kernel can create WireGuard links, by
// creating a throwaway one and deleting it. The error wraps ErrNotSupported
// when it cannot.
func KernelAvailable() error {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("probe kernel wireguard: %w", err)
	}
	probe := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: "plwg" + hex.EncodeToString(suffix[:])}}
	if err := netlink.LinkAdd(probe); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("kernel has no wireguard link type: %w", ErrNotSupported)
		}
		return fmt.Errorf("probe kernel wireguard: create link %s: %w", probe.Name, err)
	}
	if err := netlink.LinkDel(probe); err != nil {
		return fmt.Errorf("probe kernel wireguard: delete link %s: %w", probe.Name, err)
	}
	return nil
}

// Rename gives the link old the name name, when old exists and name does
// not: an earlier release named the link old, and a kernel link outlives
// the process that made it.
func Rename(old, name string) error {
	link, err := netlink.LinkByName(old)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up link %s: %w", old, err)
	}
	if _, err := netlink.LinkByName(name); err == nil {
		return nil
	}
	if err := netlink.LinkSetDown(link); err != nil {
		return fmt.Errorf("set link %s down to rename it %s: %w", old, name, err)
	}
	if err := netlink.LinkSetName(link, name); err != nil {
		return fmt.Errorf("rename link %s to %s: %w", old, name, err)
	}
	return nil
}

func openKernel(name string, mtu int) (Device, error) {
	link, err := netlink.LinkByName(name)
	switch {
	case err == nil && link.Type() == linkKind:
		// Adopted: the sessions of the running tunnel survive the restart.
	case err == nil:
		if err := KernelAvailable(); err != nil {
			return nil, err
		}
		// A link of that name but another kind is the TUN of a userspace
		// device from an earlier run: it cannot be turned into a kernel one.
		if err := netlink.LinkDel(link); err != nil {
			return nil, fmt.Errorf("delete %s link %s to replace it with a kernel wireguard link: %w", link.Type(), name, err)
		}
		fallthrough
	default:
		if err != nil && !errors.As(err, new(netlink.LinkNotFoundError)) {
			return nil, fmt.Errorf("look up link %s: %w", name, err)
		}
		link = &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
		if err := netlink.LinkAdd(link); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return nil, fmt.Errorf("create wireguard link %s: kernel has no wireguard link type: %w", name, ErrNotSupported)
			}
			return nil, fmt.Errorf("create wireguard link %s: %w", name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set wireguard link %s up: %w", name, err)
	}
	client, err := wgctrl.New()
	if err != nil {
		return nil, fmt.Errorf("open wgctrl client for %s: %w", name, err)
	}
	return &kernelDevice{name: name, client: client}, nil
}

func (d *kernelDevice) Device() (*wgtypes.Device, error) {
	dev, err := d.client.Device(d.name)
	if err != nil {
		return nil, fmt.Errorf("read wireguard device %s: %w", d.name, err)
	}
	return dev, nil
}

func (d *kernelDevice) Configure(cfg wgtypes.Config) error {
	if err := d.client.ConfigureDevice(d.name, cfg); err != nil {
		return fmt.Errorf("configure wireguard device %s: %w", d.name, err)
	}
	return nil
}

func (d *kernelDevice) Implementation() Implementation { return Kernel }

func (d *kernelDevice) Close() error {
	var errs []error
	if link, err := netlink.LinkByName(d.name); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("delete wireguard link %s: %w", d.name, err))
		}
	}
	if err := d.client.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close wgctrl client: %w", err))
	}
	return errors.Join(errs...)
}
