package services

import (
	"slices"

	"github.com/peerlink/peerlink/mcs"
)

// Options are what the services reconciler knows of its own cluster.
type Options struct {
	// ClusterID is this cluster's ID in the clusterset.
	ClusterID string
	// ImportNamespaces are the namespaces that take the services peers
	// export besides those labelled mcs.ImportNamespaceLabel; "*" is
	// every namespace.
	ImportNamespaces []string
	// Limits bound what one peer may export; zero values take
	// mcs.DefaultLimits.
	Limits mcs.Limits
}

// importsAllowedIn tells whether ImportNamespaces names ns.
func (o Options) importsAllowedIn(ns string) bool {
	return slices.Contains(o.ImportNamespaces, "*") || slices.Contains(o.ImportNamespaces, ns)
}
