// Package helmchart turns the objects of the install bundle, as kustomize
// builds them, into the generated files of the Helm chart
// bundles/helm/peerlink: values.yaml, the templates and the CRDs. The bundle
// stays the one source of truth; the chart only replaces a few values by
// Helm template expressions, found by what they are rather than by name:
//
//   - every namespace field naming the bundle's Namespace becomes the
//     release namespace (the Namespace object itself is left to
//     helm install --create-namespace);
//   - the data of a ConfigMap made by a configMapGenerator becomes a value,
//     and the ConfigMap keeps its name without the hash kustomize appends;
//     the pod template of each workload that reads it carries instead, as
//     Helm charts do, the annotation checksum/config, the SHA-256 of the
//     ConfigMap as the chart renders it, so a change still rolls the pods
//     out;
//   - each image the workloads run becomes a value (repository, tag,
//     digest), wherever the bundle names it;
//   - the replicas and the container resources of each workload become
//     values.
//
// With its default values the chart renders the bundle's objects but for
// the Namespace, the generated ConfigMaps' hash suffixes and the checksum
// annotations. The package writes no file (the test of package bundles
// writes the chart with -update) and runs no Helm; Chart.yaml is written by
// hand. It lives beside the bundles it reads and the chart it makes: only
// their test runs it, and `make generate` through that test.
package helmchart
