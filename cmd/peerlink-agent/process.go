package main

import (
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/peerlink/peerlink/api"
)

// processFlags are the flags every command of peerlink-agent has: where the
// API is, where the probes and metrics listen, how much the log says.
type processFlags struct {
	kubeconfig, probeAddr, metricsAddr string
	verbosity                          int
}

// addFlags defines the flags with the command's default addresses; where
// completes the help of both (", on the host network" for an agent that
// runs there).
func (p *processFlags) addFlags(fs *pflag.FlagSet, probeAddr, metricsAddr, where string) {
	fs.StringVar(&p.kubeconfig, "kubeconfig", "", "kubeconfig file; default: the KUBECONFIG variable, else the in-cluster config")
	fs.StringVar(&p.probeAddr, "health-probe-bind-address", probeAddr, `address of the /healthz and /readyz endpoints`+where+`; "0" disables them`)
	fs.StringVar(&p.metricsAddr, "metrics-bind-address", metricsAddr, `address of the Prometheus /metrics endpoint`+where+`; "0" disables it`)
	fs.IntVar(&p.verbosity, "v", 0, "log verbosity")
}

// newManager makes a logger carrying kv the process's (controller-runtime's
// and klog's) and returns it with the manager the command runs under: the
// client configuration and the manager options are the flags', with the
// scheme of the objects peerlink reads, as configure completes them.
func (p processFlags) newManager(configure func(*rest.Config, *ctrl.Options), kv ...any) (ctrl.Manager, logr.Logger, error) {
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(p.verbosity))).WithValues(kv...)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	cfg, err := restConfig(p.kubeconfig)
	if err != nil {
		return nil, log, err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, log, err
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: p.metricsAddr},
		HealthProbeBindAddress: p.probeAddr,
	}
	configure(cfg, &opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, log, fmt.Errorf("create manager: %w", err)
	}
	return mgr, log, nil
}

// restConfig returns the client configuration from a kubeconfig file when
// path is set, else from the KUBECONFIG variable, the in-cluster config or
// ~/.kube/config, in that order.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("find a kubeconfig (set --kubeconfig or KUBECONFIG outside a cluster): %w", err)
	}
	return cfg, nil
}

// dataplaneAgent is what the gateway and fabric agents have in common: the
// manager runs them, and they tell whether their last sync succeeded.
type dataplaneAgent interface {
	manager.Runnable
	Ready(*http.Request) error
}

// serve adds the readiness check ready, named name, to mgr beside a
// liveness ping and runs mgr until SIGTERM or SIGINT.
func serve(mgr ctrl.Manager, name string, ready healthz.Checker) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck(name, ready); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// serveAgent adds agent to mgr, its readiness the manager's, and runs mgr
// until SIGTERM or SIGINT.
func serveAgent(mgr ctrl.Manager, agent dataplaneAgent) error {
	if err := mgr.Add(agent); err != nil {
		return fmt.Errorf("add the agent: %w", err)
	}
	return serve(mgr, "dataplane", agent.Ready)
}
