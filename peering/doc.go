// Package peering works on the clusters of a peering through their API
// servers, with the rights of an administrator: it connects two clusters
// (Connect), takes a peering down (Disconnect, Reset), reads what one side
// hands to the other (Export) and what a cluster knows of its peers
// (Describe), and exports a Service to the peers (ExportService,
// UnexportService). It also loads, offline, the facts a peer's ranges are
// held to from a saved cluster-info file (LoadFacts). It applies under the
// CLI's own field manager and never forces ownership, and reports long
// waits through a Progress. The CLI gives it its flags; nothing here reads
// flags or a terminal, and errors name fields, not flags.
package peering
