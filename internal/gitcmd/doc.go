// Package gitcmd runs the git command line on a repository of this
// machine, for the build stamps and the lab's previous release.
package gitcmd
