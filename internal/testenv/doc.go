// Package testenv decides, for tests, whether what a test needs beyond the
// Go toolchain is there: root and network namespaces, or the Kubernetes
// binaries. A test that lacks it is skipped, or fails when the environment
// sets PEERLINK_REQUIRE_PRIVILEGED=1, as CI does; under go test -short (make
// test-unit) it is always skipped, so the fast loop needs neither.
package testenv
