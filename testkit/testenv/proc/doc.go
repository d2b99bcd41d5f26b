// Package proc starts the programs of the tests, the benchmarks and the lab,
// optionally inside a network namespace, with their output appended to a
// log file, watches them end, and stops or starts them again: a testbed's
// agents, tied to the test that started them, and a lab's Kubernetes
// components and registry, detached with a pid file each so that they
// outlive the command that started them and a later one finds and stops
// them (ReadPidFile, Running, Kill). Build compiles the programs with go
// build as the images are built.
//
// It does not decide which processes belong to a lab beyond the pid files
// it writes (package sweep of the lab does), nor what to run.
package proc
