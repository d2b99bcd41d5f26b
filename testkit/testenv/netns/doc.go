// Package netns makes named network namespaces and works inside them, for
// the kernel tests of dataplane, the testbed, the benchmarks and the lab:
// namespaces of a test (New, deleted when it ends; Joined, two of them
// linked by a veth) or of a lab (a Pair, joined to the host by a veth, that
// outlives the command that made it), veths between namespaces, programs run inside one (Run, Command, and the
// command lines Enter and AsPod that package proc starts), Go code run on a
// thread inside one (Do), sysctls, and the identity of a process's
// namespace (Inode).
//
// It owns the rule for tests that need root and namespaces:
// RequirePrivileged skips them without, and fails them under
// PEERLINK_REQUIRE_PRIVILEGED=1 (package testenv). InNamespace runs a whole
// test inside a namespace, as the agents run.
//
// It does not start long-running processes (package proc does) and does not
// know what a lab's or a testbed's namespaces stand for.
package netns
