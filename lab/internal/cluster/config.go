package cluster

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths below Node.Dir. Unix socket paths are kept short: they must fit in
// 108 bytes even when the lab directory is a deep temporary directory.
const (
	containerdSocket = "containerd/sock"
	containerdTTRPC  = "containerd/ttrpc"
	kubeletRoot      = "kubelet"
	cniConfDir       = "cni/net.d"
)

// ContainerdSocket is containerd's gRPC socket.
func (n *Node) ContainerdSocket() string { return n.path(containerdSocket) }

// ContainerdState is containerd's state directory. It holds the bundles of
// running tasks (each with the address of its shim's socket) and, with
// netns_mounts_under_state_dir, the pods' network namespace mounts.
func (n *Node) ContainerdState() string { return n.path("containerd", "state") }

// writeFiles writes the cluster's certificates, kubeconfigs and the API
// server's admission configuration, and every node's own configuration.
func (c *Cluster) writeFiles() error {
	for _, d := range []string{"logs", "run", "etcd"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	if err := c.writePKI(); err != nil {
		return err
	}
	if err := writeAll(c.Name, c.path, map[string]func() ([]byte, error){admissionConfig: admissionConfiguration}); err != nil {
		return err
	}
	for _, n := range c.Nodes() {
		if err := n.writeFiles(); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes the configuration of the node's containerd, kubelet and
// kube-proxy. The CNI configuration comes later, once the node knows its
// pod range (writeCNIConfig).
func (n *Node) writeFiles() error {
	for _, d := range []string{"logs", "run", "containerd/root", "containerd/state",
		"containerd/opt", "runc", cniConfDir, "cni/ipam", kubeletRoot, "pod-logs"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name(), err)
		}
	}
	files := map[string]func() ([]byte, error){
		"containerd/config.toml": n.containerdConfig,
		"kubelet-config.yaml":    n.kubeletConfig,
		"kube-proxy-config.yaml": n.kubeProxyConfig,
	}
	for _, host := range append([]string{n.Cluster.Registry}, n.Cluster.Mirrored...) {
		files["containerd/certs.d/"+host+"/hosts.toml"] = n.hostsTOML
	}
	return writeAll(n.Name(), n.path, files)
}

// writeAll writes each file of files, named relative to path, with what
// its function renders; what names the owner in errors.
func writeAll(what string, path func(...string) string, files map[string]func() ([]byte, error)) error {
	for name, render := range files {
		b, err := render()
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, name, err)
		}
		if err := os.MkdirAll(filepath.Dir(path(name)), 0o755); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := os.WriteFile(path(name), b, 0o644); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// admissionConfig is the API server's admission configuration file.
const admissionConfig = "admission.yaml"

// admissionConfiguration makes Pod Security admission enforce baseline in
// every namespace without a level of its own, as hardened clusters do: a
// peerlink namespace that lacked the level its pods need would break the
// lab.
func admissionConfiguration() ([]byte, error) {
	return []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: latest
`), nil
}

// containerdConfig keeps every path of containerd, its shims and runc inside
// the node's directory, so that nodes do not share state.
func (n *Node) containerdConfig() ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\n")
	fmt.Fprintf(&b, "root = %q\nstate = %q\n", n.path("containerd", "root"), n.ContainerdState())
	// Snapshotters and tracing this lab does not use only add startup noise.
	fmt.Fprintf(&b, "disabled_plugins = [%q, %q, %q, %q]\n",
		"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
		"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %q\n", n.ContainerdSocket())
	fmt.Fprintf(&b, "\n[ttrpc]\n  address = %q\n", n.path(containerdTTRPC))
	fmt.Fprintf(&b, "\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n", n.path("containerd", "opt"))
	const cri = `plugins."io.containerd.grpc.v1.cri"`
	fmt.Fprintf(&b, "\n[%s]\n", cri)
	fmt.Fprintf(&b, "  sandbox_image = %q\n", PauseImage)
	// Root here lacks CAP_SYS_RESOURCE: runc cannot lower the sandbox's
	// oom_score_adj below the caller's, and fails the sandbox without this.
	fmt.Fprintf(&b, "  restrict_oom_score_adj = true\n")
	fmt.Fprintf(&b, "  netns_mounts_under_state_dir = true\n")
	fmt.Fprintf(&b, "\n[%s.cni]\n  bin_dir = %q\n  conf_dir = %q\n", cri, "/usr/lib/cni", n.path(cniConfDir))
	fmt.Fprintf(&b, "\n[%s.containerd]\n  snapshotter = \"overlayfs\"\n  default_runtime_name = \"runc\"\n", cri)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", cri)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc.options]\n  Root = %q\n  SystemdCgroup = false\n", cri, n.path("runc"))
	fmt.Fprintf(&b, "\n[%s.registry]\n  config_path = %q\n", cri, n.path("containerd", "certs.d"))
	return []byte(b.String()), nil
}

// hostsTOML sends every pull of a mirrored registry host to the lab registry
// over plain HTTP.
func (n *Node) hostsTOML() ([]byte, error) {
	url := "http://" + n.Cluster.Registry
	return fmt.Appendf(nil, "server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", url, url), nil
}

func (n *Node) kubeletConfig() ([]byte, error) {
	cfg := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": false},
			"x509":      map[string]string{"clientCAFile": n.Cluster.path("pki", "ca.crt")},
		},
		"authorization":            map[string]string{"mode": "AlwaysAllow"},
		"containerRuntimeEndpoint": "unix://" + n.ContainerdSocket(),
		"cgroupDriver":             "cgroupfs",
		"cgroupsPerQOS":            true,
		"cgroupRoot":               "/" + n.CgroupName(),
		"enforceNodeAllocatable":   []string{},
		"failSwapOn":               false,
		"resolvConf":               "",
		"podLogsDir":               n.path("pod-logs"),
		"clusterDomain":            ClusterDomain,
		"clusterDNS":               []string{n.Cluster.DNSIP().String()},
		"healthzBindAddress":       "127.0.0.1",
		"readOnlyPort":             0,
		"serializeImagePulls":      false,
		// Several clusters share one disk and its free space: evicting pods
		// for disk pressure would only make the lab flaky.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Status updates every 10 s (the default) would delay Ready.
		"nodeStatusUpdateFrequency": "4s",
		"syncFrequency":             "10s",
		"fileCheckFrequency":        "10s",
		// Hosts of the lab's kind run cgroup v1 (hybrid): kubelets from
		// 1.35 on refuse to start there unless told otherwise. The field
		// exists since 1.31 (false by default there), so the setting is
		// valid for every release the lab runs.
		"failCgroupV1": false,
	}
	return yaml.Marshal(cfg)
}

func (n *Node) kubeProxyConfig() ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]string{"kubeconfig": n.Cluster.componentKubeconfig("kube-proxy")},
		"mode":               cmp.Or(n.Cluster.ProxyMode, IPTables),
		"clusterCIDR":        Join(n.Cluster.PodCIDRs()),
		"hostnameOverride":   n.Name(),
		"bindAddress":        n.IPs()[0].String(),
		"healthzBindAddress": "127.0.0.1:10256",
		"metricsBindAddress": "127.0.0.1:10249",
		// Zero leaves the host-wide conntrack table size alone, which a
		// network namespace may not change.
		"conntrack": map[string]any{"maxPerCore": 0},
	}
	return yaml.Marshal(cfg)
}
