// Package cluster brings up one Kubernetes cluster of the lab: its node
// network (a host bridge, and a network namespace per node joined to it),
// its certificates and kubeconfigs, the control plane on the first node
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), and on
// every node containerd, the kubelet and kube-proxy with their
// configuration and cgroup root; then the pod network: the CNI bridge with
// routes between the nodes' pod ranges, or, once Flannel's DaemonSet runs,
// each node's bridge configuration from its Flannel lease.
//
// It also fixes the names a cluster index maps to (namespaces, bridge,
// veths, cgroups, CNI network), which package sweep uses to remove them,
// and sets the nodes' sysctls (strict reverse-path filtering among them).
// It does not build images (package images), render add-ons (package
// addons) or install anything into the cluster (package labctl).
package cluster
