// Package proc starts the lab's long-running processes (Kubernetes components,
// containerd, the image registry) detached from the caller, optionally inside
// a network namespace, with a pid file and a log file each, and finds and
// stops them again.
//
// It does not decide which processes belong to a lab beyond the pid files and
// the predicates it is given: package sweep owns that.
package proc
