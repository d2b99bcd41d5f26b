package ctrltest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// CRDDir is bundles/install/crds of this module: peerlink's CRDs.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "bundles", "install", "crds")
}

// StartCluster starts a control plane with peerlink's CRDs and opts, whose
// client knows peerlink's kinds.
func StartCluster(t *testing.T, opts ...testcluster.Option) *testcluster.Cluster {
	t.Helper()
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.Start(t, append([]testcluster.Option{
		testcluster.WithScheme(scheme), testcluster.WithCRDDirs(CRDDir())}, opts...)...)
}

// StartManager runs a manager against the API server of cfg, with what
// setup registers in it, logging to logs at verbosity (10 and above: the
// bodies of client-go's requests and responses too). stop stops it and
// returns its error.
func StartManager(t *testing.T, cfg *rest.Config, logs *SyncBuffer, verbosity int, setup func(ctrl.Manager) error) (stop func() error) {
	t.Helper()
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: funcr.New(func(prefix, args string) {
			fmt.Fprintln(logs, prefix, args)
		}, funcr.Options{Verbosity: verbosity, RenderArgsHook: decodeHexDumps}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The tests run the same controllers in several managers of one
		// process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// Eventually polls cond every 200 ms until it returns nil, failing t with
// its last error when it has not within timeout.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// SyncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// decodeHexDumps adds to a log line's key/value list, for each value that is
// a hex dump (as client-go logs binary bodies), the bytes it shows, in
// plain hex: a secret in a dump would otherwise escape a search of the log.
func decodeHexDumps(kvs []any) []any {
	out := kvs
	for i := 1; i < len(kvs); i += 2 {
		s, ok := kvs[i].(string)
		if !ok {
			continue
		}
		if b := parseHexDump(s); len(b) > 0 {
			out = append(out, fmt.Sprint(kvs[i-1], "-decoded"), hex.EncodeToString(b))
		}
	}
	return out
}

// parseHexDump returns the bytes shown by the lines of s in the format of
// encoding/hex.Dump, nil when there are none.
func parseHexDump(s string) []byte {
	var out []byte
	for _, line := range strings.Split(s, "\n") {
		end := strings.Index(line, "  |")
		if len(line) < 10 || end < 0 {
			continue
		}
		if _, err := hex.DecodeString(line[:8]); err != nil {
			continue
		}
		for _, f := range strings.Fields(line[8:end]) {
			b, err := hex.DecodeString(f)
			if err != nil || len(b) != 1 {
				break
			}
			out = append(out, b[0])
		}
	}
	return out
}
