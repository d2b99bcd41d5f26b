// Package testcluster starts a real Kubernetes control plane for tests: etcd
// and kube-apiserver through controller-runtime's envtest and, on request,
// kube-controller-manager beside them, so that garbage collection, service
// accounts, Deployments and ReplicaSets behave as in a cluster.
//
// It owns the lookup of the binaries that hack/testbin.sh builds from the
// pinned Kubernetes release (KUBEBUILDER_ASSETS, else bin/k8s/current under
// the repository root), the installation of CRDs and objects a test needs,
// an admin kubeconfig for kubectl, the teardown of every process it
// starts, and Current, whether an object is reconciled as kstatus reads
// it, for the tests and benchmarks that wait on the controller. Tests skip when the binaries are missing, unless
// PEERLINK_REQUIRE_PRIVILEGED=1 asks for them to fail instead (package testenv).
//
// It does not build the binaries, and it runs no scheduler, kubelet or
// container runtime: pods are stored but never run. Clusters with nodes
// belong to the lab.
package testcluster
