// Package peerbundle is the GitOps peer bundle: the kustomize directory
// holding the objects of one peering on one cluster, which an administrator
// commits and a GitOps engine applies. It writes a new bundle (Init), adds
// what the peer sent after checking it as untrusted input (Add), checks a
// bundle and the two bundles of a peering against each other (Lint,
// LintPair), and shows offline what the controller will make of a bundle or
// of gateway manifests (RenderBundle, RenderFiles). It reads and writes
// files only, local ones: it never talks to a cluster, and a bundle that
// names a remote resource or base is refused before anything is fetched.
package peerbundle
