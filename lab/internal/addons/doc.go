// Package addons holds cluster add-ons the lab installs the way users'
// clusters run them: CoreDNS as the cluster DNS, Flannel as the CNI with its
// own overlay. Each is a manifest template rendered with the facts of one cluster (the
// lab registry, the pod range, the DNS Service address) and applied with
// kubectl like any manifest. Flux's controllers and MetalLB (the load
// balancer, in L2 mode) come instead from the install configuration of
// their upstream modules, at the versions hack/ pins, built with kustomize.
//
// It does not build the programs (hack/components.sh does, from their
// upstream sources), publish their images (package images) or decide when a
// cluster gets which add-on (package labctl).
package addons
