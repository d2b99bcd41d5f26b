package peering_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/peertest"
)

// TestPeerKubeconfig gives cluster-b its identity on a real API server and
// uses the kubeconfig written for it: it reads the peering's objects and
// writes PublicKeys in its tenant namespace, and is forbidden everything
// else; deleting its ServiceAccount revokes the token.
func TestPeerKubeconfig(t *testing.T) {
	a := peertest.Start(t, "cluster-a", "172.18.0.2")
	ctx := t.Context()
	var out bytes.Buffer
	s := open(t, "local", a, &out)

	u, err := url.Parse(a.TC.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	server, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	opts := peering.PeerKubeconfigOptions{Peer: "cluster-b", Server: server, Duration: time.Minute}
	var fe *field.Error
	if _, _, err := peering.PeerKubeconfig(ctx, s, opts); !errors.As(err, &fe) || fe.Field != "Duration" {
		t.Errorf("a one-minute token: error %v, want one naming Duration", err)
	}
	opts.Duration = time.Hour
	kc, expiry, err := peering.PeerKubeconfig(ctx, s, opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if d := time.Until(expiry); d <= 50*time.Minute || d > time.Hour+time.Minute {
		t.Errorf("the token expires in %s, want about an hour", d)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://"+server.String() || cfg.ServerName != peering.APIServerName || len(cfg.CAData) == 0 {
		t.Errorf("kubeconfig: server %s as %q, %d bytes of CA; want %s as %s with the cluster's CA", cfg.Host, cfg.ServerName, len(cfg.CAData), server, peering.APIServerName)
	}
	// The test API server's certificate does not name the in-cluster
	// name, which every real one does.
	cfg.ServerName = ""
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	tenant := manifests.TenantNamespace("cluster-b")
	conf := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: "cluster-b", Namespace: tenant}}
	conf.Spec.Remote.CIDR = netv1beta1.ClusterConfigCIDR{Pod: []netv1beta1.CIDR{"10.244.0.0/24"}, External: []netv1beta1.CIDR{"10.70.0.0/16"}}
	if err := a.C.Create(ctx, conf); err != nil {
		t.Fatal(err)
	}
	pk, err := manifests.PublicKeyForPeer("cluster-b", "", bytes.Repeat([]byte{7}, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	// In order: the PublicKey is created before it is applied again.
	allowed := []struct {
		what string
		do   func() error
	}{
		{"list Configurations", func() error {
			return peer.List(ctx, &netv1beta1.ConfigurationList{}, client.InNamespace(tenant))
		}},
		{"get its Configuration", func() error { return peer.Get(ctx, client.ObjectKeyFromObject(conf), &netv1beta1.Configuration{}) }},
		{"list GatewayServers", func() error { return peer.List(ctx, &netv1beta1.GatewayServerList{}, client.InNamespace(tenant)) }},
		{"list GatewayClients", func() error { return peer.List(ctx, &netv1beta1.GatewayClientList{}, client.InNamespace(tenant)) }},
		{"list Connections", func() error { return peer.List(ctx, &netv1beta1.ConnectionList{}, client.InNamespace(tenant)) }},
		{"create its PublicKey", func() error { return peer.Create(ctx, pk.DeepCopy()) }},
		{"apply its PublicKey", func() error { return peering.Apply(ctx, peer, pk) }},
		{"list PublicKeys", func() error { return peer.List(ctx, &netv1beta1.PublicKeyList{}, client.InNamespace(tenant)) }},
		{"watch its Configuration", func() error { return watchOnce(ctx, peer, tenant) }},
	}
	for _, step := range allowed {
		if err := step.do(); err != nil {
			t.Errorf("the peer may %s: %v", step.what, err)
		}
	}
	other := templates.InstallNamespace
	forbidden := map[string]func() error{
		"list Secrets":             func() error { return peer.List(ctx, &corev1.SecretList{}, client.InNamespace(tenant)) },
		"list ConfigMaps":          func() error { return peer.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(tenant)) },
		"list Pods":                func() error { return peer.List(ctx, &corev1.PodList{}, client.InNamespace(tenant)) },
		"list Roles":               func() error { return peer.List(ctx, &rbacv1.RoleList{}, client.InNamespace(tenant)) },
		"delete its Configuration": func() error { return peer.Delete(ctx, conf.DeepCopy()) },
		"create a Configuration": func() error {
			return peer.Create(ctx, &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: tenant}})
		},
		"delete a PublicKey": func() error { return peer.Delete(ctx, pk.DeepCopy()) },
		"create a GatewayServer": func() error {
			return peer.Create(ctx, &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: tenant}})
		},
		"list Configurations elsewhere":   func() error { return peer.List(ctx, &netv1beta1.ConfigurationList{}, client.InNamespace(other)) },
		"list Configurations everywhere":  func() error { return peer.List(ctx, &netv1beta1.ConfigurationList{}) },
		"create a PublicKey elsewhere":    func() error { c := pk.DeepCopy(); c.Namespace = other; return peer.Create(ctx, c) },
		"list IPs":                        func() error { return peer.List(ctx, &ipamv1alpha1.IPList{}, client.InNamespace(tenant)) },
		"list Nodes":                      func() error { return peer.List(ctx, &corev1.NodeList{}) },
		"list Namespaces":                 func() error { return peer.List(ctx, &corev1.NamespaceList{}) },
		"list Secrets of peerlink's side": func() error { return peer.List(ctx, &corev1.SecretList{}, client.InNamespace(other)) },
	}
	for what, do := range forbidden {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("the peer may not %s: got %v, want Forbidden", what, err)
		}
	}

	var sa corev1.ServiceAccount
	if err := a.C.Get(ctx, client.ObjectKey{Namespace: tenant, Name: peering.PeerAccessName}, &sa); err != nil {
		t.Fatal(err)
	}
	if sa.Labels[netv1beta1.RemoteClusterIDLabel] != "cluster-b" {
		t.Errorf("ServiceAccount labels %v, want %s: cluster-b, so a reset removes it", sa.Labels, netv1beta1.RemoteClusterIDLabel)
	}
	if err := a.C.Delete(ctx, &sa); err != nil {
		t.Fatal(err)
	}
	peertest.Eventually(t, "the token is refused once the ServiceAccount is deleted", func(ctx context.Context) error {
		err := peer.List(ctx, &netv1beta1.ConfigurationList{}, client.InNamespace(tenant))
		if !apierrors.IsUnauthorized(err) {
			return errors.New("still accepted")
		}
		return nil
	})
}

// watchOnce opens a watch of the Configurations of ns and closes it.
func watchOnce(ctx context.Context, c client.WithWatch, ns string) error {
	w, err := c.Watch(ctx, &netv1beta1.ConfigurationList{}, client.InNamespace(ns))
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}
