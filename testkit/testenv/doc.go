// Package testenv holds what the tests, the benchmarks and the lab need from
// this machine beyond the Go toolchain, and the rule for when it is missing.
// A test that lacks root and network namespaces, or the Kubernetes binaries,
// is skipped, or fails when the environment sets PEERLINK_REQUIRE_PRIVILEGED=1,
// as CI does; under go test -short (make test-unit) it is always skipped, so
// the fast loop needs neither. RepoRoot finds the repository the binaries and
// manifests are built from.
//
// Its packages netns (named network namespaces, veths, code and programs run
// inside them) and proc (processes started, watched and stopped, and the
// binaries they run built with go build) serve both the harnesses of tests
// (testkit/testbed, the kernel tests of dataplane) and the lab, whose
// clusters outlive the command that started them.
//
// It holds no product code. No product package imports it, nor the other
// harnesses (testkit/testbed, testkit/testcluster, testkit/peertest),
// outside its tests: a test of this package checks it.
package testenv
