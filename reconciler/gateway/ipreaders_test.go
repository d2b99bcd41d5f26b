package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// testIPReaders checks that the ServiceAccount of every gateway, server or
// client, may read the IPs of every namespace and write none, for as long
// as its gateway exists.
func testIPReaders(t *testing.T, e *gatewayEnv, server wgCase[*netv1beta1.WgGatewayServer], client wgCase[*netv1beta1.WgGatewayClient]) {
	ns := e.namespace(t, "ip-readers")
	spec := wgSpec("peer", gatewayServiceTemplate("peer", corev1.ServiceTypeClusterIP, 0))
	srv := server.new(peerMeta(ns, "srv", "remote-srv"), spec)
	cli := client.new(peerMeta(ns, "cli", "remote-cli"), spec)
	e.create(t, srv)
	e.create(t, cli)
	reads := func(name string) error {
		user := "system:serviceaccount:" + ns + ":gw-" + name
		if e.can(t, user, "elsewhere", "create", "ipam.liqo.io", "ips", "") {
			return fmt.Errorf("%s may create IPs", user)
		}
		for _, verb := range []string{"list", "watch"} {
			if !e.can(t, user, "elsewhere", verb, "ipam.liqo.io", "ips", "") {
				return fmt.Errorf("%s may not %s the IPs of another namespace", user, verb)
			}
		}
		return nil
	}
	eventually(t, "the gateways read the IPs", func(context.Context) error {
		return errors.Join(reads("srv"), reads("cli"))
	})
	if err := e.c.Delete(t.Context(), srv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a deleted gateway's account no longer reads the IPs", func(context.Context) error {
		if err := reads("srv"); err == nil {
			return errors.New("gw-srv still reads the IPs")
		}
		return reads("cli")
	})
}
