// Package installer installs peerlink into a cluster from the install bundle
// embedded in the binary (bundles/install), as `peerlink install` does: it
// builds the bundle with kustomize, with the facts the admin gives merged
// into the ConfigMap peerlink-facts (the controller detects the others),
// applies the CRDs and waits until the API server serves them, applies the
// rest, and waits until the controller and the fabric agents run and the
// controller has published the cluster's facts.
//
// It does not detect facts itself (the controller does, in the cluster),
// and it never deletes: uninstalling is `kubectl delete -k bundles/install`.
package installer
