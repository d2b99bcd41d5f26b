package wireguard

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
)

// Link is the WireGuard device of one link name across repairs: Ensure
// opens it (adopting a kernel link an earlier run left, and first giving
// the link of an earlier release's name the current one) and opens it
// again once its link went away; Close stops it and deletes the link,
// whichever run made it. It is used by one goroutine.
type Link struct {
	name, legacy string
	impl         Implementation
	log          logr.Logger
	dev          Device
}

// NewLink returns the Link of the link name, which an earlier release
// named legacy, with the back-end impl. Nothing is opened yet.
func NewLink(name, legacy string, impl Implementation, log logr.Logger) *Link {
	return &Link{name: name, legacy: legacy, impl: impl, log: log}
}

// Device is the open device; nil before Ensure succeeded and after Close.
func (l *Link) Device() Device { return l.dev }

// Ensure returns the open device, opened with the MTU mtu when it is
// opened now: at the first call, and whenever the link was deleted under
// the device since.
func (l *Link) Ensure(mtu int) (Device, error) {
	if l.dev != nil {
		if _, err := netlink.LinkByName(l.name); err == nil {
			return l.dev, nil
		}
		l.log.Info("the tunnel link is gone; creating it again", "link", l.name)
		if err := l.dev.Close(); err != nil {
			l.log.V(1).Info("close the old device", "error", err.Error())
		}
		l.dev = nil
	}
	if err := Rename(l.legacy, l.name); err != nil {
		return nil, err
	}
	dev, err := Open(l.name, l.impl, mtu, l.log)
	if err != nil {
		return nil, fmt.Errorf("open the WireGuard device %s: %w", l.name, err)
	}
	l.dev = dev
	l.log.Info("WireGuard device ready", "link", l.name, "implementation", dev.Implementation())
	return dev, nil
}

// Close stops the device, if open, and deletes the link if it is still
// there: a kernel link outlives the process, a device this run never
// opened may have one from an earlier run.
func (l *Link) Close() error {
	var errs []error
	if l.dev != nil {
		if err := l.dev.Close(); err != nil {
			errs = append(errs, err)
		}
		l.dev = nil
	}
	if link, err := netlink.LinkByName(l.name); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}
