// Package labctl runs a lab: it records what a lab is made of, installs the
// host's dependencies and builds the Kubernetes binaries through the
// repository's scripts, builds and publishes the images, creates the
// namespaces, brings up the clusters in parallel and installs the echo server
// and peerlink into each (a previous release of it, built from the
// repository's history, when told to, which it then upgrades and downgrades
// on demand), and takes a lab down again (through package sweep), checking
// that nothing is left.
//
// It is the one API of the lab that the lab command and the end-to-end tests
// use; the work of a single cluster belongs to package node.
package labctl
