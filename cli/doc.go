// Package cli is the peerlink command tree: its flags, its output and the
// wiring from both to the packages that do the work (manifests, peering,
// peerbundle, templates, lint). It holds no peering logic of its own.
//
// cmd/peerlink runs it as the peerlink binary; Run takes its arguments and
// streams, so tests, a kubectl plugin or another binary can run the same
// commands in process.
package cli
