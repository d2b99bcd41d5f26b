// Package node brings up one single-node Kubernetes cluster of the lab inside
// an existing network namespace: its certificates and kubeconfigs, the
// configuration of containerd, the CNI bridge, the kubelet and kube-proxy,
// the cgroup root of its pods, and the processes (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy).
//
// It also fixes the names a cluster index maps to (namespace, veth, cgroup,
// CNI network), which package sweep uses to remove them, and sets the
// namespace's sysctls. It does not create the namespace (package labctl
// does, with internal/testenv/netns), build images (package images) or
// install anything into the cluster (package labctl).
package cluster
