// Package bundles holds peerlink's kustomize bundles: install/, the base that
// installs peerlink into a cluster, monitoring/, its Prometheus Operator
// monitors and Grafana dashboard, and examples/, peer bundles as two
// administrators commit them; and helm/peerlink, the Helm chart generated
// from install/ (and monitoring/, off by default). Its code embeds install/
// for `peerlink install` (Install) and reads the metrics the dashboard
// queries (DashboardMetrics); its tests
// build the bundles with kustomize and apply them to a real API server, and
// check that the CRDs accept the manifests users write and reject malformed
// ones with a message naming the field. They also run the Lua health checks
// of examples/argocd in gopher-lua, as Argo CD does, on objects the
// controller reported on. The chart's tests keep it generated from install/
// (-update rewrites it) and render it with helm template, which must give
// what kustomize builds, with its default values and with values set, but
// for the facts ConfigMap's name, which the chart does not hash, and the
// checksum of that ConfigMap on the pods that read it. Package helmchart,
// below, makes the chart.
package bundles
