// Package api holds what every peerlink client of the Kubernetes API shares
// beyond the types of networking.liqo.io/v1beta1: the scheme they decode
// objects with, and the field managers they apply under, so that the
// controller, the agents and the CLI each own their fields and nothing else.
package api
