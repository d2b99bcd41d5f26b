// Package sweep finds and removes everything a lab made on the host: its
// processes (by pid file, network namespace, cgroup, or use of the lab
// directory), containerd shim sockets, mounts below the lab directory,
// cgroups, network namespaces and veths, the CNI plugins' and kubelet's files
// outside the lab directory, and the directory itself. It also reports what
// is left, which is how the lab proves a teardown complete.
//
// It knows a cluster's names through package node; it creates nothing.
package sweep
