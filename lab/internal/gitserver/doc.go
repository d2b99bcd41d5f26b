// Package gitserver is the lab's Git server: it keeps one bare repository per
// administrator in a directory and serves them for fetch and push over Git's
// smart HTTP protocol, on plain HTTP without authentication, as Flux's
// source-controller reads a GitRepository. The protocol itself is git's own:
// each request runs `git http-backend` as a CGI program, so what the clients
// see is what a Git hosting server built on git shows them.
//
// It does not decide where the server runs or on which address (a lab
// cluster reaches it only on an address its network namespace routes to,
// as for the image registry), does not run it in the background, and does
// not know what the repositories hold: the lab pushes into them with git
// like an administrator would.
package gitserver
