// Command wgbare runs one device of the embedded wireguard-go, the library
// and version the gateways use, with nothing else around it: no NAT, no
// overlay, no policy routing, no API. The dataplane benchmark starts one in
// each of two network namespaces (each in a process of its own, as two
// gateways are) to measure bare WireGuard beside the peerlink path.
//
// It creates the TUN link, configures the device and the link's address,
// and runs until SIGTERM or SIGINT.
package main

import (
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

func main() {
	name := flag.String("name", "wgbare", "name of the TUN link")
	mtu := flag.Int("mtu", 1340, "MTU of the link")
	address := flag.String("address", "", "address of the link, in CIDR notation")
	privateKey := flag.String("private-key", "", "the device's private key, base64")
	peerKey := flag.String("peer-public-key", "", "the peer's public key, base64")
	endpoint := flag.String("endpoint", "", "the peer's address:port")
	port := flag.Int("listen-port", 51840, "UDP port")
	flag.Parse()
	if err := run(*name, *mtu, *address, *privateKey, *peerKey, *endpoint, *port); err != nil {
		fmt.Fprintln(os.Stderr, "wgbare:", err)
		os.Exit(1)
	}
}

func run(name string, mtu int, address, privateKey, peerKey, endpoint string, port int) error {
	addr, err := netip.ParsePrefix(address)
	if err != nil {
		return fmt.Errorf("--address: %w", err)
	}
	keys := make([]string, 2)
	for i, k := range []string{privateKey, peerKey} {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(b) != 32 {
			return fmt.Errorf("key %d: want the base64 of 32 bytes", i)
		}
		keys[i] = hex.EncodeToString(b)
	}
	tdev, err := tun.CreateTUN(name, mtu)
	if err != nil {
		return fmt.Errorf("create TUN %s: %w", name, err)
	}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), device.NewLogger(device.LogLevelError, name+": "))
	defer dev.Close()
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nendpoint=%s\nallowed_ip=0.0.0.0/0\n", keys[0], port, keys[1], endpoint)
	if err := dev.IpcSet(cfg); err != nil {
		return fmt.Errorf("configure the device: %w", err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), 32)}}); err != nil {
		return fmt.Errorf("add address %s: %w", addr, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	if err := dev.Up(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
