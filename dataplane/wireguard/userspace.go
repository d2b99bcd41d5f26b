package wireguard

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// socketDir is where wireguard-go serves, and wgctrl and `wg` look for, the
// UAPI socket <name>.sock of a userspace device.
const socketDir = "/var/run/wireguard"

// userspaceDevice is wireguard-go running in this process on a TUN link. It
// lives as long as the process: the kernel removes the TUN link when the
// process exits, and a restarted agent creates it again.
type userspaceDevice struct {
	name      string
	dev       *device.Device
	bind      *followBind
	uapi      net.Listener
	client    *wgctrl.Client
	closeOnce sync.Once
}

func openUserspace(name string, mtu int, log logr.Logger) (Device, error) {
	// A link left with this name (a kernel wireguard link, a persistent TUN)
	// is replaced: wireguard-go must own the TUN it reads.
	if link, err := netlink.LinkByName(name); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			return nil, fmt.Errorf("delete %s link %s to replace it with a userspace device: %w", link.Type(), name, err)
		}
	}
	tdev, err := tun.CreateTUN(name, mtu)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("create TUN %s: /dev/net/tun missing: %w", name, ErrNotSupported)
		}
		return nil, fmt.Errorf("create TUN %s: %w", name, err)
	}
	wlog := log.WithName("wireguard-go")
	bind := newFollowBind(conn.NewDefaultBind(), log.WithName("key-rotation"))
	dev := device.NewDevice(tdev, bind, &device.Logger{
		Verbosef: func(format string, args ...any) { wlog.V(1).Info(fmt.Sprintf(format, args...)) },
		Errorf:   func(format string, args ...any) { wlog.Info(fmt.Sprintf(format, args...)) },
	})
	bind.dev = dev
	fail := func(err error) (Device, error) {
		dev.Close()
		return nil, err
	}
	file, err := ipc.UAPIOpen(name)
	if err != nil {
		return fail(fmt.Errorf("open UAPI socket of %s in %s: %w", name, socketDir, err))
	}
	uapi, err := ipc.UAPIListen(name, file)
	if err != nil {
		file.Close()
		return fail(fmt.Errorf("listen on UAPI socket of %s: %w", name, err))
	}
	file.Close()
	go func() {
		for {
			c, err := uapi.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	client, err := wgctrl.New()
	if err != nil {
		uapi.Close()
		return fail(fmt.Errorf("open wgctrl client for %s: %w", name, err))
	}
	d := &userspaceDevice{name: name, dev: dev, bind: bind, uapi: uapi, client: client}
	// wireguard-go stops by itself when its TUN link is deleted under it;
	// the socket goes with it so that wgctrl reports the device as gone.
	go func() {
		<-dev.Wait()
		d.shutdown()
	}()
	link, err := netlink.LinkByName(name)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("look up TUN link %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		d.Close()
		return nil, fmt.Errorf("set TUN link %s up: %w", name, err)
	}
	if err := dev.Up(); err != nil {
		d.Close()
		return nil, fmt.Errorf("start wireguard-go on %s: %w", name, err)
	}
	return d, nil
}

func (d *userspaceDevice) closed() bool {
	select {
	case <-d.dev.Wait():
		return true
	default:
		return false
	}
}

func (d *userspaceDevice) Device() (*wgtypes.Device, error) {
	if d.closed() {
		return nil, fmt.Errorf("read wireguard device %s: %w", d.name, ErrClosed)
	}
	dev, err := d.client.Device(d.name)
	if err != nil {
		return nil, fmt.Errorf("read wireguard device %s: %w", d.name, err)
	}
	return dev, nil
}

func (d *userspaceDevice) Configure(cfg wgtypes.Config) error {
	if d.closed() {
		return fmt.Errorf("configure wireguard device %s: %w", d.name, ErrClosed)
	}
	if err := d.client.ConfigureDevice(d.name, cfg); err != nil {
		return fmt.Errorf("configure wireguard device %s: %w", d.name, err)
	}
	if err := d.bind.refresh(); err != nil {
		return fmt.Errorf("configure wireguard device %s: %w", d.name, err)
	}
	return nil
}

func (d *userspaceDevice) Implementation() Implementation { return Userspace }

// shutdown stops wireguard-go, which closes the TUN (the kernel deletes the
// link), and removes the UAPI socket.
func (d *userspaceDevice) shutdown() {
	d.closeOnce.Do(func() {
		d.uapi.Close()
		d.dev.Close()
		_ = os.Remove(filepath.Join(socketDir, d.name+".sock"))
	})
}

func (d *userspaceDevice) Close() error {
	d.shutdown()
	if err := d.client.Close(); err != nil {
		return fmt.Errorf("close wgctrl client: %w", err)
	}
	return nil
}
