// Package ctrltest runs peerlink's controllers in tests: a control plane
// with peerlink's CRDs and a controller-runtime manager against it, whose
// log a test can search. For tests only.
package ctrltest
