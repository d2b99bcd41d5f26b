// Package images builds the lab's container images without a container
// engine and pushes them to the lab's local registry, which it also starts:
// the agent image as make images builds it (package image), for this
// machine only; the lab's own programs compiled as static binaries, and the
// components it runs from other projects, each wrapped in a one-layer image
// by the same package; and tool images of other projects that clients pull
// by their public names (socat, netshoot), made of this machine's Debian
// packages.
//
// It does not configure the clusters to pull from that registry (package
// node writes containerd's mirror configuration).
package images
