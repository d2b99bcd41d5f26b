package wireguard

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestLink runs a Link in a fresh namespace: Ensure takes over the link of
// the old name, keeps the device while its link is there, opens a new one
// once the link was deleted, and Close leaves no link behind.
func TestLink(t *testing.T) {
	if !netns.InNamespace(t) {
		return
	}
	l := NewLink("pltun0", "plold0", Userspace, logr.Discard())
	if l.Device() != nil {
		t.Fatal("Device() before Ensure is not nil")
	}
	// A veth stands for the link an earlier release left under the old
	// name: renamed, then replaced by the userspace device's TUN.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "plold0"}, PeerName: "plpeer0"}); err != nil {
		t.Fatal(err)
	}
	dev, err := l.Ensure(1340)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("plold0"); err == nil {
		t.Error("the link of the old name is still there")
	}
	link, err := netlink.LinkByName("pltun0")
	if err != nil || link.Attrs().MTU != 1340 || link.Type() != "tuntap" {
		t.Fatalf("link pltun0: %v, %v; want a TUN of MTU 1340", link, err)
	}
	if again, err := l.Ensure(1340); err != nil || again != dev || l.Device() != dev {
		t.Fatalf("Ensure with the link there = %v, %v; want the same device", again, err)
	}

	if err := netlink.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	repaired, err := l.Ensure(1280)
	if err != nil {
		t.Fatal(err)
	}
	if repaired == dev {
		t.Error("Ensure after the link was deleted kept the old device")
	}
	if link, err := netlink.LinkByName("pltun0"); err != nil || link.Attrs().MTU != 1280 {
		t.Fatalf("link pltun0 after the repair: %v, %v; want MTU 1280", link, err)
	}
	if _, err := repaired.Device(); err != nil {
		t.Errorf("the new device: %v", err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("pltun0"); err == nil {
		t.Error("the link is still there after Close")
	}
	if l.Device() != nil {
		t.Error("Device() after Close is not nil")
	}
}
