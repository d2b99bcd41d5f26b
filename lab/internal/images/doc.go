// Package images builds the lab's container images without a container
// engine: it compiles peerlink's agent and the lab's own programs as static
// binaries, wraps each in a one-layer image, and pushes them to the lab's
// local registry, which it also starts.
//
// It does not configure the clusters to pull from that registry (package
// node writes containerd's mirror configuration).
package images
