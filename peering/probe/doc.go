// Package probe is the wire of `peerlink verify`: a server that answers
// every HTTP request with the name of its pod (Serve), and a client that
// asks a list of named targets, retrying each for a while, and prints one
// Result per target as a JSON line (Check). Both run in the agent image
// (`peerlink-agent probe serve|check`), so that a cluster that runs
// peerlink can verify its peerings with no other image.
package probe
