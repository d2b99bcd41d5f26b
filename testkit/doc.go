// Package testkit is the test machinery of peerlink, for tests only (and
// the lab and benchmarks, which run the same real components): network
// namespaces and processes (testenv), a dataplane of two clusters built of
// namespaces (testbed), test control planes (testcluster) and two peered
// API servers with the controller (peertest). No product package imports
// it; testenv's tests check so.
package testkit
