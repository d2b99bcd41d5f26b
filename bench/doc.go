// Command bench prints peerlink's benchmark tables: each measured figure
// beside its goal and the ratio of the two, so one run shows where the
// project stands. `make bench` runs it from the repository root.
//
// Each table is one function in a file of its own, listed in main.go. The
// timing goals of the project are checked here, not by timed tests.
package main
