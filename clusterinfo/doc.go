// Package clusterinfo is the contract of the cluster-info ConfigMap:
// its name, its keys and their encoding, and the facts it carries. The
// controller publishes it in its namespace, with its own version; the CLI
// reads it to learn the cluster's ID and ranges and the controller's
// version, and the fabric agents to learn the pod and external ranges, none
// of them with access to the controller's flags. It is also the contract
// of the node subnets each fabric agent publishes on its Node for the
// controller (NodeSubnetsAnnotation).
package clusterinfo
