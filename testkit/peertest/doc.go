// Package peertest runs, for tests, a cluster as a peering sees it: a real
// API server and controller manager, the peerlink controller in-process,
// and goroutines standing in for the kubelet and the gateway agent. Tests of
// the CLI and of package peering peer two of them.
package peertest
