// Package services runs the Multi-Cluster Services API for this cluster:
// it publishes the Services exported here to every peer's tenant namespace
// (for the gateways to carry through the tunnel), sets the
// ServiceExports' conditions, and turns the exports of every cluster of
// the clusterset (this one's and what the gateways received) into
// ServiceImports, derived Services and EndpointSlices, with endpoint
// addresses translated into the ranges this cluster sees each peer under.
package services
