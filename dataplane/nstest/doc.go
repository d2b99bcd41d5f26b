// Package nstest builds network namespaces for the dataplane's tests and
// benchmarks: named namespaces (so that `ip netns exec` can run programs in
// them), veth pairs between them, and functions that run Go code on a
// thread inside one.
//
// It owns the policy for privileged tests: RequirePrivileged skips a test
// that needs root when run without it, and fails it instead when the
// environment sets PEERLINK_REQUIRE_PRIVILEGED=1, as CI does.
//
// It is not used by the agents themselves.
package nstest
