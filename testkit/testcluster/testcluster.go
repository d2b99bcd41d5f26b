package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peerlink/peerlink/testkit/testenv"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// fieldOwner is the server-side apply field manager of objects given with
// WithObjects.
const fieldOwner = "testcluster"

// kubectlTimeout bounds one run of Cluster.Kubectl.
const kubectlTimeout = 2 * time.Minute

// Cluster is a running control plane. Its processes stop when the test that
// started it ends.
type Cluster struct {
	// Config is the REST config of an admin user (group system:masters).
	Config *rest.Config
	// Client is a controller-runtime client for Config, using the scheme given
	// with WithScheme, else client-go's types and apiextensions/v1.
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file for the admin user.
	Kubeconfig string
	// BinDir is the directory of the Kubernetes binaries in use.
	BinDir string
	// Dir is the directory of the cluster's certificates, data and logs.
	Dir string

	env *envtest.Environment
}

// Option configures Start.
type Option func(*options)

type options struct {
	scheme            *runtime.Scheme
	crds              []*apiextensionsv1.CustomResourceDefinition
	crdDirs           []string
	objects           []*unstructured.Unstructured
	apiServerFlags    [][]string
	controllerManager bool
	kcmFlags          []string
}

// WithScheme sets the scheme of Cluster.Client and of CRD installation. It
// replaces the default one, so it should include client-go's types
// (k8s.io/client-go/kubernetes/scheme.AddToScheme). Start does not modify it.
func WithScheme(s *runtime.Scheme) Option {
	return func(o *options) { o.scheme = s }
}

// WithCRDs installs CRDs before Start returns, waiting until they are served.
func WithCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) Option {
	return func(o *options) { o.crds = append(o.crds, crds...) }
}

// WithCRDDirs installs the CRDs found in the YAML or JSON files of the given
// directories (or files) before Start returns. A missing path fails the test.
func WithCRDDirs(dirs ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, dirs...) }
}

// WithObjects applies objects with server-side apply, in order, after the
// control plane and the CRDs are up. A CustomResourceDefinition among them is
// waited for until established, so later objects may be of its kind. The
// objects are copied, not modified.
func WithObjects(objs ...*unstructured.Unstructured) Option {
	return func(o *options) { o.objects = append(o.objects, objs...) }
}

// WithAPIServerFlag sets a kube-apiserver flag (name without dashes), on top
// of the flags envtest passes.
func WithAPIServerFlag(name string, values ...string) Option {
	return func(o *options) {
		o.apiServerFlags = append(o.apiServerFlags, append([]string{name}, values...))
	}
}

// WithControllerManager runs kube-controller-manager beside the API server,
// with all its default controllers (garbage collector, namespace,
// serviceaccount and token, root CA publisher, Deployment, ReplicaSet, ...).
// flags are added to its command line ("--name=value"), after the ones Start
// sets, so they override them.
func WithControllerManager(flags ...string) Option {
	return func(o *options) {
		o.controllerManager = true
		o.kcmFlags = append(o.kcmFlags, flags...)
	}
}

// Start starts etcd and kube-apiserver (and kube-controller-manager with
// WithControllerManager) for the test, installs the CRDs and objects given as
// options, and stops everything in t.Cleanup. It skips the test when the
// binaries are missing (see the package documentation).
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}

	testenv.Require(t, "testcluster", nil)
	binDir, err := assetsDir()
	if err != nil {
		t.Fatalf("testcluster: find the Kubernetes binaries: %v", err)
	}
	bins := []string{"etcd", "kube-apiserver", "kubectl"}
	if o.controllerManager {
		bins = append(bins, "kube-controller-manager")
	}
	if missing := missingBinaries(binDir, bins...); len(missing) > 0 {
		testenv.Require(t, "testcluster", fmt.Errorf("%s missing in %s: run `make testbin` (hack/testbin.sh) or set %s",
			strings.Join(missing, ", "), binDir, assetsEnv))
	}

	scheme := o.scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			t.Fatalf("testcluster: build scheme: %v", err)
		}
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			t.Fatalf("testcluster: build scheme: %v", err)
		}
	}

	dir := t.TempDir()
	c := &Cluster{BinDir: binDir, Dir: dir}
	env, err := c.startControlPlane(t, &o, scheme)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	c.env = env
	c.Config = rest.CopyConfig(env.Config)
	c.Client, err = client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("testcluster: create client: %v", err)
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatalf("testcluster: write kubeconfig: %v", err)
	}

	if o.controllerManager {
		if err := c.startControllerManager(t, o.kcmFlags); err != nil {
			t.Fatalf("testcluster: %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, obj := range o.objects {
		if err := c.apply(ctx, obj); err != nil {
			t.Fatalf("testcluster: %v", err)
		}
	}
	return c
}

// NewManager returns a controller-runtime manager on the cluster for the
// controllers a test runs in its own process, with o's scheme, logger and
// the rest. It serves neither metrics nor health probes, so that no port
// collides between tests, and lets the controllers be set up again in
// other managers of the process.
func (c *Cluster) NewManager(t testing.TB, o ctrl.Options) ctrl.Manager {
	t.Helper()
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.HealthProbeBindAddress = "0"
	o.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(rest.CopyConfig(c.Config), o)
	if err != nil {
		t.Fatalf("testcluster: new manager: %v", err)
	}
	return mgr
}

// UserKubeconfig writes a kubeconfig for a user authenticated by a client
// certificate, name in the given groups, and returns its path. The user may
// do only what RBAC grants it.
func (c *Cluster) UserKubeconfig(t testing.TB, name string, groups ...string) string {
	t.Helper()
	path, err := c.userKubeconfig(name, groups...)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return path
}

func (c *Cluster) userKubeconfig(name string, groups ...string) (string, error) {
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of user %s: %w", name, err)
	}
	path := filepath.Join(c.Dir, strings.ReplaceAll(name, ":", "-")+".kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig of user %s: %w", name, err)
	}
	return path, nil
}

// startControlPlane starts etcd and kube-apiserver with envtest, with their
// logs in c.Dir, and registers their teardown.
func (c *Cluster) startControlPlane(t testing.TB, o *options, scheme *runtime.Scheme) (*envtest.Environment, error) {
	env := &envtest.Environment{
		Scheme:                scheme,
		CRDs:                  o.crds,
		CRDDirectoryPaths:     o.crdDirs,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: c.BinDir,
	}

	etcdLog, err := c.logFile(t, "etcd")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = &envtest.Etcd{
		Path:    filepath.Join(c.BinDir, "etcd"),
		DataDir: filepath.Join(c.Dir, "etcd"),
		Out:     etcdLog,
		Err:     etcdLog,
	}
	env.ControlPlane.KubectlPath = filepath.Join(c.BinDir, "kubectl")

	apiLog, err := c.logFile(t, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(c.BinDir, "kube-apiserver")
	api.CertDir = filepath.Join(c.Dir, "pki")
	api.Out = apiLog
	api.Err = apiLog
	for _, f := range o.apiServerFlags {
		api.Configure().Set(f[0], f[1:]...)
	}
	for _, d := range []string{env.ControlPlane.Etcd.DataDir, api.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}

	// Registered before the controller manager's teardown, so it runs after.
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testcluster: stop control plane: %v", err)
		}
	})
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return env, nil
}

// logFile creates the log file of a process envtest starts (see logPath).
func (c *Cluster) logFile(t testing.TB, name string) (*os.File, error) {
	f, err := os.Create(c.logPath(t, name))
	if err != nil {
		return nil, fmt.Errorf("create log file: %w", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, nil
}

// logPath is c.Dir/<name>.log, whose end is logged when the test fails.
func (c *Cluster) logPath(t testing.TB, name string) string {
	path := filepath.Join(c.Dir, name+".log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testcluster: last lines of %s:\n%s", name, proc.Tail(path, 40))
		}
	})
	return path
}

// apply server-side applies a copy of obj and waits for a CRD to be
// established.
func (c *Cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	u := obj.DeepCopy()
	ref := u.GetKind() + " " + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		ref = u.GetKind() + " " + ns + "/" + u.GetName()
	}
	err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply %s: %w", ref, err)
	}
	gvk := u.GroupVersionKind()
	if gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
		return nil
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Client.Get(ctx, types.NamespacedName{Name: u.GetName()}, &crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to be established: %w", ref, err)
	}
	return nil
}

// Kubectl runs the kubectl of BinDir with the admin kubeconfig and returns
// its standard output and error.
func (c *Cluster) Kubectl(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"),
		append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %v", ctx.Err(), kubectlTimeout)
		}
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), nil
}
