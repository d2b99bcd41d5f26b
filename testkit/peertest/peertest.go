package peertest

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/reconciler"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/ctrltest"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// Cluster is a test control plane running the peerlink controller
// in-process, with one Node and, in place of the kubelet and the gateway
// agent that do not run here, goroutines that report gateway pods Running
// and tunnels Connected.
type Cluster struct {
	// ID is the cluster ID.
	ID string
	// NodeIP is the address of its one Node.
	NodeIP string
	// TC is the control plane.
	TC *testcluster.Cluster
	// C is an admin client.
	C client.Client
}

// Start starts a cluster with pod CIDR 10.244.0.0/24, the same on
// every test cluster, as in the lab: the peers' ranges must be remapped.
func Start(t *testing.T, id, nodeIP string) *Cluster {
	t.Helper()
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	tc := testcluster.Start(t,
		testcluster.WithScheme(scheme),
		testcluster.WithCRDDirs(ctrltest.CRDDir()),
		// No kubelet posts node status here: the node lifecycle controller
		// would mark the node unreachable and its pods not ready.
		testcluster.WithControllerManager("--controllers=*,-node-lifecycle-controller,-taint-eviction-controller"),
	)
	p := &Cluster{ID: id, NodeIP: nodeIP, TC: tc, C: tc.Client}
	ctx := t.Context()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: templates.InstallNamespace}}
	if err := p.C.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range defaults {
		if err := p.C.Create(ctx, tmpl); err != nil {
			t.Fatalf("create default template %s: %v", tmpl.GetName(), err)
		}
	}
	p.createNode(t)

	// Each test cluster runs the same controllers in this process.
	mgr := tc.NewManager(t, ctrl.Options{Scheme: scheme})
	facts := reconciler.ClusterFacts{
		Info: clusterinfo.Info{
			ClusterID:    id,
			PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")},
			ServiceCIDR:  netip.MustParsePrefix("10.96.0.0/12"),
			ExternalCIDR: netip.MustParsePrefix("10.70.0.0/16"),
			InternalCIDR: netip.MustParsePrefix("10.80.0.0/16"),
		},
		Namespace: templates.InstallNamespace,
	}
	if err := reconciler.SetupAll(mgr, facts); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := mgr.Start(runCtx); err != nil {
			t.Errorf("cluster %s: manager: %v", id, err)
		}
	}()
	go func() { defer wg.Done(); p.runKubelet(t, runCtx) }()
	go func() { defer wg.Done(); p.runAgent(t, runCtx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	Eventually(t, "cluster "+id+" publishes its facts", func(ctx context.Context) error {
		_, err := clusterinfo.Read(ctx, p.C, templates.InstallNamespace)
		return err
	})
	return p
}

// createNode creates the cluster's Node with its address, as a kubelet would.
func (p *Cluster) createNode(t *testing.T) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + p.ID}}
	if err := p.C.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	// The controller manager annotates new nodes meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := p.C.Get(t.Context(), client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: p.NodeIP}}
		return p.C.Status().Update(t.Context(), node)
	})
	if err != nil {
		t.Fatalf("report the address of node %s: %v", node.Name, err)
	}
}

// loop calls step every 100ms until ctx ends; errors are retried, since
// objects come and go under the step's feet.
func loop(ctx context.Context, step func(context.Context) error) {
	for {
		_ = step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runKubelet binds every pending pod to the node and reports it Running and
// Ready with an address in the pod CIDR, and removes pods being deleted.
func (p *Cluster) runKubelet(t *testing.T, ctx context.Context) {
	next := 10
	loop(ctx, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := p.C.List(ctx, &pods); err != nil {
			return err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.DeletionTimestamp != nil {
				// The containers are stopped: the kubelet confirms the deletion.
				if err := p.C.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				continue
			}
			if pod.Status.Phase == corev1.PodRunning {
				continue
			}
			if pod.Spec.NodeName == "" {
				binding := &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
					Target:     corev1.ObjectReference{Kind: "Node", Name: "node-" + p.ID},
				}
				if err := p.C.SubResource("binding").Create(ctx, pod, binding); err != nil {
					return err
				}
				if err := p.C.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
					return err
				}
			}
			ip := fmt.Sprintf("10.244.0.%d", next)
			now := metav1.Now()
			pod.Status.Phase = corev1.PodRunning
			pod.Status.HostIP = p.NodeIP
			pod.Status.PodIP = ip
			pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
			pod.Status.StartTime = &now
			pod.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			if err := p.C.Status().Update(ctx, pod); err != nil {
				return err
			}
			next++
		}
		return nil
	})
}

// runAgent does what the gateway agent reports: for every gateway whose
// peer's PublicKey is present, a Connection gw-<gateway> owned by the
// gateway, Connected.
func (p *Cluster) runAgent(t *testing.T, ctx context.Context) {
	loop(ctx, func(ctx context.Context) error {
		var servers netv1beta1.GatewayServerList
		var clients netv1beta1.GatewayClientList
		if err := p.C.List(ctx, &servers); err != nil {
			return err
		}
		if err := p.C.List(ctx, &clients); err != nil {
			return err
		}
		var gateways []client.Object
		for i := range servers.Items {
			gateways = append(gateways, &servers.Items[i])
		}
		for i := range clients.Items {
			gateways = append(gateways, &clients.Items[i])
		}
		for _, gw := range gateways {
			if err := p.connect(ctx, gw); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *Cluster) connect(ctx context.Context, gw client.Object) error {
	if gw.GetDeletionTimestamp() != nil {
		return nil
	}
	peer := gw.GetLabels()[netv1beta1.RemoteClusterIDLabel]
	var keys netv1beta1.PublicKeyList
	if err := p.C.List(ctx, &keys, client.InNamespace(gw.GetNamespace()), client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer}); err != nil {
		return err
	}
	if len(keys.Items) == 0 {
		return nil
	}
	key := client.ObjectKey{Namespace: gw.GetNamespace(), Name: manifests.GatewayObjectName(gw.GetName())}
	var conn netv1beta1.Connection
	err := p.C.Get(ctx, key, &conn)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	kind, role := manifests.KindGatewayServer, gatewayrole.Server
	if _, ok := gw.(*netv1beta1.GatewayClient); ok {
		kind, role = manifests.KindGatewayClient, gatewayrole.Client
	}
	conn = netv1beta1.Connection{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: peer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: netv1beta1.GroupVersion.String(), Kind: kind, Name: gw.GetName(), UID: gw.GetUID(),
			}},
		},
		Spec: netv1beta1.ConnectionSpec{Type: netv1beta1.ConnectionTypeOf(role), GatewayRef: corev1.ObjectReference{
			APIVersion: netv1beta1.GroupVersion.String(), Kind: kind, Name: gw.GetName(), Namespace: gw.GetNamespace(), UID: gw.GetUID(),
		}},
	}
	if err := p.C.Create(ctx, &conn); err != nil {
		return err
	}
	conn.Status.Value = netv1beta1.Connected
	conn.Status.Latency = netv1beta1.ConnectionLatency{Value: "1.2ms", Timestamp: metav1.Now()}
	conn.Status.PathMTU = 1232
	return p.C.Status().Update(ctx, &conn)
}

// Event is a change of a peering object, as a watch reported it.
type Event struct {
	RV    int64
	Kind  string
	Name  string
	Typ   watch.EventType
	Ready bool
}

// Recorder records the changes of the peering kinds of one cluster, to
// check in which order they happened: resource versions of one cluster are
// ordered like the writes.
type Recorder struct {
	// scheme gives the kinds of the objects Current reads.
	scheme *kruntime.Scheme
	mu     sync.Mutex
	events []Event
}

func (p *Cluster) Record(t *testing.T) *Recorder {
	t.Helper()
	wc, err := client.NewWithWatch(p.TC.Config, client.Options{Scheme: p.C.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{scheme: p.C.Scheme()}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, l := range []client.ObjectList{
		&netv1beta1.ConfigurationList{}, &netv1beta1.GatewayServerList{},
		&netv1beta1.GatewayClientList{}, &netv1beta1.PublicKeyList{},
	} {
		w, err := wc.Watch(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					r.add(ev)
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

func (r *Recorder) add(ev watch.Event) {
	obj, ok := ev.Object.(client.Object)
	if !ok {
		return
	}
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	e := Event{RV: rv, Name: obj.GetName(), Typ: ev.Type}
	switch o := obj.(type) {
	case *netv1beta1.Configuration:
		e.Kind = manifests.KindConfiguration
		// An object Current cannot read is recorded as not Ready.
		ready, _, err := testcluster.Current(r.scheme, o)
		e.Ready = err == nil && ready
	case *netv1beta1.GatewayServer:
		e.Kind = manifests.KindGatewayServer
	case *netv1beta1.GatewayClient:
		e.Kind = manifests.KindGatewayClient
	case *netv1beta1.PublicKey:
		e.Kind = manifests.KindPublicKey
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// first returns the resource version of the first Event matching, or -1.
func (r *Recorder) First(match func(Event) bool) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := int64(-1)
	for _, e := range r.events {
		if match(e) && (first < 0 || e.RV < first) {
			first = e.RV
		}
	}
	return first
}

func Added(kind string) func(Event) bool {
	return func(e Event) bool { return e.Kind == kind && e.Typ == watch.Added }
}

// eventually retries check until it passes or the deadline.
func Eventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := check(t.Context())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get reads an object, reporting it absent as an error that names it.
func (p *Cluster) Get(ctx context.Context, ns, name string, obj client.Object) error {
	if err := p.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return fmt.Errorf("cluster %s: %T %s/%s: %w", p.ID, obj, ns, name, err)
	}
	return nil
}

// absent fails unless the object is gone.
func (p *Cluster) Absent(ctx context.Context, ns, name string, obj client.Object) error {
	err := p.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("cluster %s: %T %s/%s still there", p.ID, obj, ns, name)
}

// MustGet reads each of objs, named name in ns, and fails t on error.
func (p *Cluster) MustGet(t *testing.T, ns, name string, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := p.Get(t.Context(), ns, name, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// CheckDisconnected fails t unless the cluster holds what a disconnect
// leaves of its peering with peer: in the peer's tenant namespace its
// Configuration, and no gateway or PublicKey.
func (p *Cluster) CheckDisconnected(t *testing.T, peer string) {
	t.Helper()
	ns := manifests.TenantNamespace(peer)
	for _, obj := range []client.Object{&netv1beta1.GatewayServer{}, &netv1beta1.GatewayClient{}, &netv1beta1.PublicKey{}} {
		if err := p.Absent(t.Context(), ns, peer, obj); err != nil {
			t.Error(err)
		}
	}
	if err := p.Get(t.Context(), ns, peer, &netv1beta1.Configuration{}); err != nil {
		t.Errorf("disconnect removed the Configuration: %v", err)
	}
}

// CheckReset fails t unless the tenant namespace of peer is gone, as a
// reset leaves it.
func (p *Cluster) CheckReset(t *testing.T, peer string) {
	t.Helper()
	if err := p.Absent(t.Context(), "", manifests.TenantNamespace(peer), &corev1.Namespace{}); err != nil {
		t.Error(err)
	}
}

// keyReader returns a kubeconfig for a user who may read gateways and the
// cluster info ConfigMap, and nothing else: no Secret.
func (p *Cluster) KeyReader(t *testing.T) string {
	t.Helper()
	const user = "key-reader"
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{netv1beta1.GroupVersion.Group}, Resources: []string{"gatewayservers", "gatewayclients"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{clusterinfo.Name}, Verbs: []string{"get"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := p.C.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := p.TC.UserKubeconfig(t, user)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	if err := c.List(t.Context(), &secrets); !apierrors.IsForbidden(err) {
		t.Fatalf("user %s lists Secrets: %v; want forbidden", user, err)
	}
	return kubeconfig
}

// keySecretPublic returns data.publicKey of a gateway's key Secret.
func (p *Cluster) KeySecretPublic(t *testing.T, ns, gateway string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := p.Get(t.Context(), ns, manifests.GatewayObjectName(gateway), &s); err != nil {
		t.Fatal(err)
	}
	return s.Data[netv1beta1.PublicKeyField]
}
