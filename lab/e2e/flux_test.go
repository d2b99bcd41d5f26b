package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/addons"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/gitserver"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// fluxWait bounds every wait on Flux: a poll of the GitRepository, the
// apply, and health checks that may wait for a gateway pod and a handshake.
const fluxWait = 4 * time.Minute

// TestFluxGitOps peers two clusters the way most users will: each admin
// keeps a Git repository that the real Flux (source-controller and
// kustomize-controller, built from source) syncs into their cluster, and the
// only things that move are git pushes and the two files the admins send
// each other. Each peer bundle is synced by a Flux Kustomization with the
// health checks docs/gitops.md recommends, which must turn Ready only when
// the tunnel is Connected and fail, naming the gateway, when a commit
// stalls it. An MTU change is a commit on both sides; removing the bundles
// from Git unpeers with nothing left behind.
func TestFluxGitOps(t *testing.T) {
	alone(t)
	ctx, l := newLabWith(t, 25*time.Minute, labctl.Options{Names: []string{"flux-a", "flux-b"}, Flux: true})
	url := serveGit(t, ctx, l)
	a, b := newAdmins(t, l)
	idA, idB := a.n.ClusterID, b.n.ClusterID
	ra, rb := newGitRepo(t, ctx, url, a), newGitRepo(t, ctx, url, b)
	bundleA := filepath.Join(ra.dir, "peers", idB)
	bundleB := filepath.Join(rb.dir, "peers", idA)

	// A, the client, commits its bundle and the Kustomization syncing it;
	// Flux applies them, and waits for a peer that is not there yet.
	a.offline(t, ctx, "init.log", "bundle", "init", bundleA, "--peer", idB, "--role", "client")
	ra.writePeerSync(t, idB, "GatewayClient")
	rev := ra.commit(t, ctx, "peer with "+idB)
	ra.bootstrap(t, ctx)
	ra.waitApplied(t, ctx, idB, rev)
	if k := ra.kustomization(t, ctx, idB); meta.IsStatusConditionTrue(k.Status.Conditions, "Ready") {
		t.Fatalf("%s: Kustomization of a peering without its peer's file is Ready: %+v", idA, k.Status.Conditions)
	}
	a.peerlink(t, ctx, "", "bundle", "export", "--peer", idB, "-o", filepath.Join(a.dir, "to-"+idB+".yaml"))
	file1 := a.send(t, filepath.Join(a.dir, "to-"+idB+".yaml"), b)

	// B, the server, commits its bundle with file 1.
	b.offline(t, ctx, "init.log", "bundle", "init", bundleB, "--peer", idA, "--role", "server", "--service-type", "NodePort")
	b.offline(t, ctx, "add.log", "bundle", "add", bundleB, file1)
	rb.writePeerSync(t, idA, "GatewayServer")
	rev = rb.commit(t, ctx, "peer with "+idA)
	rb.bootstrap(t, ctx)
	rb.waitApplied(t, ctx, idA, rev)
	b.peerlink(t, ctx, "", "bundle", "export", "--peer", idA, "-o", filepath.Join(b.dir, "to-"+idA+".yaml"))
	file2 := b.send(t, filepath.Join(b.dir, "to-"+idA+".yaml"), a)

	// A commits file 2: both Kustomizations turn Ready, and only with the
	// tunnel up.
	a.offline(t, ctx, "add.log", "bundle", "add", bundleA, file2)
	rev = ra.commit(t, ctx, "add the files of "+idB)
	ra.waitReady(t, ctx, idB, rev)
	rb.waitReady(t, ctx, idA, "")
	for _, side := range [][2]*admin{{a, b}, {b, a}} {
		if st, err := l.ConnectionState(ctx, side[0].n, side[1].n); err != nil || st != netv1beta1.Connected {
			t.Errorf("%s: Kustomization Ready with the Connection %q (%v)", side[0].n.ClusterID, st, err)
		}
	}
	checkPeered(t, ctx, l, a.n, b.n)

	// A rotates its key through Git while a request crosses the peering
	// every 50 ms: a commit of spec.keyRotation, B's commit of the
	// PublicKey A exports then (both keys), and once A's tunnel runs on the
	// new pair alone, B's commit of the one A exports after.
	const probe = "rotation-probe"
	startProbe(t, ctx, l, a.n, b.n, probe, rotationProbeInterval, labctl.ProbeTimeout, 15*time.Minute)
	start := time.Now()
	gwA := filepath.Join(bundleA, "gatewayclient.yaml")
	editFile(t, gwA, "spec:\n", "spec:\n  keyRotation: \"1\"\n")
	ra.commit(t, ctx, "rotate the gateway's key")
	ns := netv1beta1.TenantNamespacePrefix + idB
	waitFor(t, ctx, fluxWait, idA+"'s next public key", func() error {
		if a.kubectl(t, ctx, "get", "gatewayclient", "-n", ns, idB, "-o", "jsonpath={.status.keyRotation.nextPublicKey}") == "" {
			return errors.New("not published yet")
		}
		return nil
	})
	sendKeys := func(msg string) string {
		out := filepath.Join(a.dir, "to-"+idB+".yaml")
		a.peerlink(t, ctx, "", "bundle", "export", "--peer", idB, "-o", out)
		b.offline(t, ctx, "add.log", "bundle", "add", bundleB, a.send(t, out, b))
		return rb.commit(t, ctx, msg)
	}
	sendKeys("accept " + idA + "'s next key")
	waitFor(t, ctx, 5*time.Minute, idA+"'s tunnel on the new key pair alone", func() error {
		got := a.kubectl(t, ctx, "get", "gatewayclient", "-n", ns, idB, "-o", "jsonpath={.status.keyRotation.requested}/{.status.keyRotation.nextPublicKey}")
		if got != "1/" {
			return fmt.Errorf("keyRotation requested/next: %q", got)
		}
		return nil
	})
	rb.waitReady(t, ctx, idA, sendKeys(idA+"'s new key alone"))
	took := time.Since(start)
	sent, failed := failedRequests(t, ctx, l, a.n, probe, start, start.Add(took))
	t.Logf("%s's key rotated through Git in %.1fs: %d requests sent meanwhile, %d failed", idA, took.Seconds(), sent, failed)
	checkNoneFailed(t, idA+"'s key rotation through Git", took, sent, failed)
	if pk := b.kubectl(t, ctx, "get", "publickeies", "-n", netv1beta1.TenantNamespacePrefix+idA, "-o", "jsonpath={.items[*].spec.nextPublicKey}"); pk != "" {
		t.Errorf("%s still holds a next key of %s: %s", idB, idA, pk)
	}
	checkPeered(t, ctx, l, a.n, b.n)

	// A commits a gateway that cannot be rendered: the Kustomization fails
	// early, naming the gateway, whose condition says why.
	editFile(t, gwA, "name: wireguard-client\n", "name: no-such-template\n")
	rev = ra.commit(t, ctx, "use a template that does not exist")
	ra.waitFailed(t, ctx, idB, rev, "GatewayClient/"+netv1beta1.TenantNamespacePrefix+idB+"/"+idB)
	stalledMsg := a.kubectl(t, ctx, "get", "gatewayclient", "-n", netv1beta1.TenantNamespacePrefix+idB, idB,
		"-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].message}`)
	if !strings.Contains(stalledMsg, "no-such-template") || !strings.Contains(stalledMsg, "not found") {
		t.Errorf("%s: the stalled GatewayClient says %q", idA, stalledMsg)
	}
	if info := a.peerlink(t, ctx, "", "info", "peer", idB); !strings.Contains(info, "no-such-template") {
		t.Errorf("%s: peerlink info peer does not say why the gateway is stalled:\n%s", idA, info)
	}
	editFile(t, gwA, "name: no-such-template\n", "name: wireguard-client\n")
	rev = ra.commit(t, ctx, "back to the installed template")
	ra.waitReady(t, ctx, idB, rev)

	// Both admins lower the MTU and commit it.
	const mtu = 1280
	old, lower := fmt.Sprintf("mtu: %d\n", netv1beta1.DefaultMTU), fmt.Sprintf("mtu: %d\n", mtu)
	editFile(t, gwA, old, lower)
	editFile(t, filepath.Join(bundleB, "gatewayserver.yaml"), old, lower)
	revA, revB := ra.commit(t, ctx, "lower the MTU"), rb.commit(t, ctx, "lower the MTU")
	for _, ad := range []*admin{a, b} {
		waitFor(t, ctx, fluxWait, "the gateway of "+ad.n.ClusterID+" runs with the new MTU", func() error {
			return gatewayRunsWithMTU(ctx, l, ad, mtu)
		})
	}
	ra.waitReady(t, ctx, idB, revA)
	rb.waitReady(t, ctx, idA, revB)
	checkPeered(t, ctx, l, a.n, b.n)

	// Both admins remove the peering from Git: Flux prunes the peer's
	// Kustomization, which prunes what it applied.
	for _, side := range []struct {
		r    *gitRepo
		peer string
	}{{ra, idB}, {rb, idA}} {
		side.r.removePeer(t, side.peer)
		side.r.commit(t, ctx, "unpeer "+side.peer)
	}
	for _, side := range [][2]*admin{{a, b}, {b, a}} {
		n, peer := side[0].n, side[1].n
		waitFor(t, ctx, fluxWait, "cluster "+n.ClusterID+" has nothing of the peering once it is out of Git", func() error {
			if left := peeringObjects(t, ctx, l, n, peer, append(gatewayKinds(), "configurations")); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			out, err := l.Kubectl(ctx, n, "get", "namespace", netv1beta1.TenantNamespacePrefix+peer.ClusterID,
				"kustomizations.kustomize.toolkit.fluxcd.io", "-A", "-o", "name", "--ignore-not-found")
			if err != nil {
				return err
			}
			for _, name := range strings.Fields(string(out)) {
				if !strings.HasSuffix(name, "/"+rootSync) {
					return fmt.Errorf("left: %s", name)
				}
			}
			return nil
		})
	}
}

// serveGit runs the lab's Git server until the test ends, on the host
// address of the first cluster, which every cluster's pods reach, and
// returns its base URL.
func serveGit(t *testing.T, ctx context.Context, l *labctl.Lab) string {
	t.Helper()
	srv, err := gitserver.New(filepath.Join(t.TempDir(), "git"), &logWriter{t: t})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(cluster.HostIP(l.Clusters[0].Index), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("git server: %v", err)
		}
	})
	for _, ad := range l.Clusters {
		if err := srv.CreateRepository(ctx, ad.ClusterID); err != nil {
			t.Fatal(err)
		}
	}
	return "http://" + ln.Addr().String()
}

// gitRepo is an admin's clone of their own repository, which Flux syncs
// into their cluster.
type gitRepo struct {
	ad  *admin
	url string
	dir string
}

// rootSync names the Kustomization that syncs the repository's flux/
// directory, which holds one Kustomization per peer bundle.
const rootSync = "peerlink-peers"

// fluxDir is where a repository keeps the Kustomizations of its peers.
const fluxDir = "flux"

func newGitRepo(t *testing.T, ctx context.Context, base string, ad *admin) *gitRepo {
	t.Helper()
	r := &gitRepo{ad: ad, url: base + "/" + ad.n.ClusterID + ".git", dir: filepath.Join(ad.dir, "repo")}
	r.git(t, ctx, "init", "--quiet", "--initial-branch="+gitserver.DefaultBranch, r.dir)
	r.git(t, ctx, "-C", r.dir, "remote", "add", "origin", r.url)
	return r
}

// git runs git as the admin, with none of this machine's configuration.
func (r *gitRepo) git(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=" + r.ad.n.ClusterID + " admin",
		"-c", "user.email=admin@" + r.ad.n.ClusterID + ".example"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: git %s: %v\n%s", r.ad.n.ClusterID, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits everything in the clone, pushes it and returns the
// revision as Flux reports it.
func (r *gitRepo) commit(t *testing.T, ctx context.Context, msg string) string {
	t.Helper()
	r.git(t, ctx, "-C", r.dir, "add", "--all")
	r.git(t, ctx, "-C", r.dir, "commit", "--quiet", "-m", msg)
	r.git(t, ctx, "-C", r.dir, "push", "--quiet", "origin", gitserver.DefaultBranch)
	rev := gitserver.DefaultBranch + "@sha1:" + r.git(t, ctx, "-C", r.dir, "rev-parse", "HEAD")
	t.Logf("%s pushed %q: %s", r.ad.n.ClusterID, msg, rev)
	return rev
}

// writePeerSync writes the Flux Kustomization of the bundle peers/<peer>,
// with the health checks of docs/gitops.md: the Configuration, the
// gateway of kind gatewayKind and its Connection, and lists it in flux/.
// The objects named after the peer alone are quoted: a cluster ID such as
// 0619e087 or 12345678 is a number to YAML.
func (r *gitRepo) writePeerSync(t *testing.T, peer, gatewayKind string) {
	t.Helper()
	tenant := netv1beta1.TenantNamespacePrefix + peer
	sync := fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: peerlink-peer-%[1]s
  namespace: %[2]s
spec:
  interval: 10m
  retryInterval: 15s
  timeout: 3m
  sourceRef:
    kind: GitRepository
    name: %[3]s
  path: ./peers/%[1]s
  prune: true
  healthChecks:
  - apiVersion: networking.liqo.io/v1beta1
    kind: Configuration
    name: %[1]q
    namespace: %[4]s
  - apiVersion: networking.liqo.io/v1beta1
    kind: %[5]s
    name: %[1]q
    namespace: %[4]s
  - apiVersion: networking.liqo.io/v1beta1
    kind: Connection
    name: %[6]s%[1]s
    namespace: %[4]s
  healthCheckExprs:
  - apiVersion: networking.liqo.io/v1beta1
    kind: Connection
    current: status.?value.orValue('') == 'Connected'
    failed: status.?value.orValue('') == 'Error'
`, peer, addons.FluxNamespace, rootSync, tenant, gatewayKind, netv1beta1.GatewayObjectPrefix)
	writeFile(t, filepath.Join(r.dir, fluxDir, "peer-"+peer+".yaml"), sync)
	writeFile(t, filepath.Join(r.dir, fluxDir, "kustomization.yaml"),
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- peer-"+peer+".yaml\n")
}

// removePeer deletes the bundle of peer and its Kustomization from the
// clone.
func (r *gitRepo) removePeer(t *testing.T, peer string) {
	t.Helper()
	for _, p := range []string{filepath.Join(r.dir, "peers", peer), filepath.Join(r.dir, fluxDir, "peer-"+peer+".yaml")} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(r.dir, fluxDir, "kustomization.yaml"),
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n")
}

// bootstrap points the admin's Flux at the repository, as `flux
// bootstrap` or an install would: a GitRepository and the Kustomization of
// flux/. It is the only object the test applies by hand.
func (r *gitRepo) bootstrap(t *testing.T, ctx context.Context) {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  interval: 10s
  url: %[3]s
  ref:
    branch: %[4]s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  interval: 10m
  retryInterval: 15s
  sourceRef:
    kind: GitRepository
    name: %[1]s
  path: ./%[5]s
  prune: true
`, rootSync, addons.FluxNamespace, r.url, gitserver.DefaultBranch, fluxDir)
	path := filepath.Join(r.ad.dir, "flux-bootstrap.yaml")
	writeFile(t, path, manifest)
	r.ad.kubectl(t, ctx, "apply", "--server-side", "-f", path)
}

// fluxKustomization is what the test reads of a Flux Kustomization.
type fluxKustomization struct {
	Status struct {
		LastAttemptedRevision string             `json:"lastAttemptedRevision"`
		LastAppliedRevision   string             `json:"lastAppliedRevision"`
		Conditions            []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// kustomization reads the Kustomization of the bundle of peer.
func (r *gitRepo) kustomization(t *testing.T, ctx context.Context, peer string) fluxKustomization {
	t.Helper()
	k, err := r.readKustomization(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (r *gitRepo) readKustomization(ctx context.Context, peer string) (fluxKustomization, error) {
	var k fluxKustomization
	out, err := r.ad.l.Kubectl(ctx, r.ad.n, "get", "kustomizations.kustomize.toolkit.fluxcd.io",
		"-n", addons.FluxNamespace, "peerlink-peer-"+peer, "-o", "json")
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(out, &k); err != nil {
		return k, fmt.Errorf("Kustomization peerlink-peer-%s: %w", peer, err)
	}
	return k, nil
}

// waitApplied waits until Flux has applied revision rev of the bundle of
// peer, whatever its health.
func (r *gitRepo) waitApplied(t *testing.T, ctx context.Context, peer, rev string) {
	t.Helper()
	r.waitKustomization(t, ctx, peer, "applied "+rev, func(k fluxKustomization) error {
		if got := k.Status.LastAttemptedRevision; got != rev {
			return fmt.Errorf("last attempted revision %q", got)
		}
		// Flux records the revision when it starts; the objects are in
		// the cluster once it checks their health or is done.
		c := meta.FindStatusCondition(k.Status.Conditions, "Ready")
		if c == nil {
			return errors.New("no Ready condition")
		}
		if c.Reason == "HealthCheckFailed" || c.Reason == "ReconciliationSucceeded" {
			return nil
		}
		if h := meta.FindStatusCondition(k.Status.Conditions, "Healthy"); h != nil &&
			strings.Contains(h.Message, "Running health checks for revision "+rev) {
			return nil
		}
		return fmt.Errorf("Ready %s: %s: %s", c.Status, c.Reason, c.Message)
	})
}

// waitReady waits until the Kustomization of the bundle of peer is Ready
// at revision rev (at any revision for rev empty).
func (r *gitRepo) waitReady(t *testing.T, ctx context.Context, peer, rev string) {
	t.Helper()
	r.waitKustomization(t, ctx, peer, "Ready", func(k fluxKustomization) error {
		if rev != "" && k.Status.LastAppliedRevision != rev {
			return fmt.Errorf("last applied revision %q, want %q", k.Status.LastAppliedRevision, rev)
		}
		c := meta.FindStatusCondition(k.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("not Ready: %+v", c)
		}
		return nil
	})
}

// waitFailed waits until the Kustomization of the bundle of peer fails its
// health checks at revision rev, naming the object obj.
func (r *gitRepo) waitFailed(t *testing.T, ctx context.Context, peer, rev, obj string) {
	t.Helper()
	r.waitKustomization(t, ctx, peer, "failing on "+obj, func(k fluxKustomization) error {
		if got := k.Status.LastAttemptedRevision; got != rev {
			return fmt.Errorf("last attempted revision %q", got)
		}
		c := meta.FindStatusCondition(k.Status.Conditions, "Ready")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "HealthCheckFailed" {
			return fmt.Errorf("Ready: %+v", c)
		}
		if !strings.Contains(c.Message, obj) {
			return fmt.Errorf("Ready is False without naming %s: %s", obj, c.Message)
		}
		t.Logf("%s: Kustomization not Ready: %s", r.ad.n.ClusterID, c.Message)
		return nil
	})
}

func (r *gitRepo) waitKustomization(t *testing.T, ctx context.Context, peer, what string, check func(fluxKustomization) error) {
	t.Helper()
	start, nudged := time.Now(), time.Now()
	waitFor(t, ctx, fluxWait, r.ad.n.ClusterID+": Kustomization of "+peer+" "+what, func() error {
		k, err := r.readKustomization(ctx, peer)
		if err == nil {
			err = check(k)
		}
		if err != nil && time.Since(nudged) > fluxNudge {
			r.reconcileNow(t, ctx, peer)
			nudged = time.Now()
		}
		return err
	})
	t.Logf("%s: Kustomization of %s %s after %.1fs", r.ad.n.ClusterID, peer, what, time.Since(start).Seconds())
}

// fluxNudge is how long a wait on Flux goes before it asks Flux to sync
// now. A Flux controller that failed a few times in a row (a source not
// reachable yet while the cluster starts) retries after a delay that
// doubles each time, up to minutes: an admin then runs `flux reconcile`.
const fluxNudge = time.Minute

// reconcileNow asks Flux to sync the repository and the Kustomizations
// now, as `flux reconcile kustomization --with-source` does: it stamps the
// reconcile.fluxcd.io/requestedAt annotation on them.
func (r *gitRepo) reconcileNow(t *testing.T, ctx context.Context, peer string) {
	t.Helper()
	stamp := "reconcile.fluxcd.io/requestedAt=" + time.Now().Format(time.RFC3339Nano)
	for _, obj := range []string{"gitrepositories.source.toolkit.fluxcd.io/" + rootSync,
		"kustomizations.kustomize.toolkit.fluxcd.io/" + rootSync, "kustomizations.kustomize.toolkit.fluxcd.io/peerlink-peer-" + peer} {
		// The peer's Kustomization may not exist yet: the root's sync
		// makes it.
		if _, err := r.ad.l.Kubectl(ctx, r.ad.n, "-n", addons.FluxNamespace, "annotate", "--overwrite", obj, stamp); err != nil {
			t.Logf("%s: ask Flux to sync %s now: %v", r.ad.n.ClusterID, obj, err)
			continue
		}
		t.Logf("%s: Flux asked to sync %s now", r.ad.n.ClusterID, obj)
	}
}

// editFile replaces the only occurrence of old in the file at path.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(src), old) != 1 {
		t.Fatalf("%s does not hold %q once:\n%s", path, old, src)
	}
	writeFile(t, path, strings.Replace(string(src), old, new, 1))
}

// writeFile writes a file, making its directory.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
