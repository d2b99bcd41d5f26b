// Package peering works on the clusters of a peering through their API
// servers, with the rights of an administrator: it connects two clusters
// (Connect), takes a peering down (Disconnect, Reset), reads what one side
// hands to the other (Export) and what a cluster knows of its peers
// (Describe). It applies under the CLI's own field manager and never forces
// ownership, and reports long waits through a Progress. The CLI gives it its
// flags; nothing here reads flags or a terminal.
package peering
