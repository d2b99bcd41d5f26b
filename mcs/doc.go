// Package mcs is peerlink's model of the Multi-Cluster Services API
// (sigs.k8s.io/mcs-api): the export set one cluster publishes to its peers
// (Service: what a ServiceExport makes of a Service and its ready
// endpoints), how a set travels (a compressed JSON document, read one
// service at a time within Limits, every field checked as the API server
// would check the objects it becomes), what a peer may make this cluster
// hold (Limits, per service and in total, kept by a Tally), and how the
// exports of several clusters of the same namespace/name merge into one
// import, conflicts resolved as the API says: the oldest export wins,
// oldest as this cluster observed it, never as a peer claims it.
//
// It does not read or write the cluster (package reconciler does), nor move
// sets between clusters (package mcs/exchange does, over the tunnel).
package mcs
