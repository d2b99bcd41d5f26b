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
//     and its name, which kustomize suffixes with a hash of the content, is
//     hashed the same way by the template, so a change still rolls out the
//     pods that read it;
//   - each image the workloads run becomes a value (repository, tag,
//     digest), wherever the bundle names it;
//   - the replicas and the container resources of each workload become
//     values.
//
// With its default values the chart renders exactly the bundle's objects
// but the Namespace. The package writes no file (the test of package bundles
// writes the chart with -update) and runs no Helm; Chart.yaml is written by
// hand.
package helmchart
