# peerlink: connect the pod networks of independent Kubernetes clusters.
# Run `make help` for the targets.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO            ?= go
CONTROLLER_GEN = $(GO) tool -modfile=hack/tools/go.mod controller-gen
STATICCHECK = $(GO) tool -modfile=hack/tools/go.mod staticcheck
# The Kubernetes version of the test control plane and the lab is pinned in
# hack/kube/go.mod and nowhere else.
KUBE_VERSION  := $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2; exit}' hack/kube/go.mod 2>/dev/null)
TESTBIN       := $(CURDIR)/bin/k8s/$(KUBE_VERSION)
export KUBEBUILDER_ASSETS ?= $(TESTBIN)
export PEERLINK_TEST_TIMES ?= $(CURDIR)/bin/test-times.tsv

CRD_DIR       := bundles/install/crds
# The Helm chart, generated from bundles/install but for its Chart.yaml, and
# the Helm CLI built from the version pinned in hack/helm/go.mod.
CHART_DIR     := bundles/helm/peerlink
HELM          := $(CURDIR)/bin/helm/current/helm
# Kinds whose schemas embed a whole Deployment or Service spec: generated
# without descriptions so `kubectl apply` (client-side) stays under the
# annotation size limit.
LARGE_CRDS    := networking.liqo.io_wggatewayservers.yaml networking.liqo.io_wggatewayclients.yaml
# Each fuzz target's run in `make test` (twelve targets; longer runs: FUZZTIME=5m make fuzz).
FUZZTIME      ?= 15s
# The lab's end-to-end tests time outages on real clusters: `make test` runs
# them after the other packages, alone, so that no other test binary takes
# the CPU their kubelets, kube-proxies and gateways need.
E2E_PKG       := github.com/peerlink/peerlink/lab/e2e
# How many lab e2e tests that bound no time run at once in make test
# (hack/e2e.sh); each brings up a lab of two or three clusters.
E2E_PARALLEL  ?= 3
# The oldest minor release of Kubernetes upstream supports, pinned in
# hack/kube-$(OLDEST_KUBERNETES); lab/e2e's TestSmokeOldestKubernetes runs on it.
OLDEST_KUBERNETES := 1.35
# The components the lab's clusters run (built from source, cached in bin/);
# built before the lab's tests so that no test waits for a cold build.
LAB_COMPONENTS := coredns flanneld source-controller kustomize-controller metallb-controller metallb-speaker

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Where `make images` writes the agent image as an OCI image layout.
IMAGES_DIR    := bin/images/peerlink-agent

.PHONY: build
build: ## Build the peerlink CLI and agent into bin/, stamped with their version (VERSION=..., default git describe).
	ldflags=$$($(GO) run ./hack/images ldflags --version '$(VERSION)') && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$ldflags" -o bin/ ./cmd/...

.PHONY: images
images: ## Build the agent image for linux/amd64 and linux/arm64 as an OCI image layout in bin/images/peerlink-agent (VERSION=..., default git describe).
	$(GO) run ./hack/images build --dir $(IMAGES_DIR) --version '$(VERSION)'

.PHONY: push
push: ## Build the agent image and push it to REGISTRY=host[:port][/path] as peerlink-agent:<version>, with the docker/podman login credentials.
	@test -n "$(REGISTRY)" || { echo "REGISTRY is required: make push REGISTRY=host[:port][/path]"; exit 1; }
	$(MAKE) --no-print-directory images
	$(GO) run ./hack/images push --dir $(IMAGES_DIR) --registry '$(REGISTRY)'

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD manifests from api/, copy the Multi-Cluster Services CRDs of the pinned mcs-api, and regenerate the Helm chart from bundles/install.
	$(CONTROLLER_GEN) object paths=./api/...
	rm -rf $(CRD_DIR) && mkdir -p $(CRD_DIR)
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:dir=$(CRD_DIR)
	tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  $(CONTROLLER_GEN) crd:maxDescLen=0,generateEmbeddedObjectMeta=true paths=./api/... output:crd:dir=$$tmp && \
	  for f in $(LARGE_CRDS); do cp $$tmp/$$f $(CRD_DIR)/$$f; done
	# The Multi-Cluster Services CRDs, as the pinned sigs.k8s.io/mcs-api ships them.
	cp $$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)/config/crd/multicluster.x-k8s.io_*.yaml $(CRD_DIR)/
	chmod 644 $(CRD_DIR)/multicluster.x-k8s.io_*.yaml
	hack/crd-kustomization.sh $(CRD_DIR)
	$(GO) test ./bundles -run '^TestHelmChart$$' -count=1 -update

.PHONY: verify
verify: ## Fail when a generated file is stale.
	@git diff --quiet -- api $(CRD_DIR) $(CHART_DIR) || { echo "uncommitted changes under api/, $(CRD_DIR) or $(CHART_DIR): commit them first"; exit 1; }
	$(MAKE) --no-print-directory generate
	@git diff --exit-code --stat -- api $(CRD_DIR) $(CHART_DIR) || { echo "generated files are stale: run make generate"; exit 1; }
	@test -z "$$(git status --porcelain -- api $(CRD_DIR) $(CHART_DIR))" || { git status --porcelain -- api $(CRD_DIR) $(CHART_DIR); echo "generated files are stale: run make generate"; exit 1; }

.PHONY: lint
lint: ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

.PHONY: testbin
testbin: ## Build kube-apiserver, kube-controller-manager, etcd and kubectl from source into bin/ (cached).
	hack/testbin.sh

.PHONY: components
components: ## Build the lab's cluster components from source into bin/ (cached): Flux source- and kustomize-controller with their CRDs, CoreDNS, flanneld, Helm, MetalLB controller and speaker.
	hack/components.sh

.PHONY: chart
chart: ## Package the Helm chart bundles/helm/peerlink into bin/chart/ (builds Helm from source once).
	hack/components.sh helm
	$(HELM) package $(CHART_DIR) --destination bin/chart

.PHONY: test-unit
test-unit: ## The fast loop: every test that needs neither root nor a control plane (go test -short), in a minute or two.
	$(GO) test -short -count=1 ./...

.PHONY: test
test: ## Run every test CI runs: unit, golden, envtest, privileged netns, fuzz, lab e2e; print the time of each step and e2e test.
	@hack/timed.sh --reset
	hack/timed.sh "build Kubernetes (testbin)" hack/testbin.sh
	hack/timed.sh "verify and lint" $(MAKE) --no-print-directory verify lint
	hack/timed.sh "build Helm" hack/components.sh helm
	hack/timed.sh "go test, all but lab/e2e" $(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -vx '$(E2E_PKG)')
	hack/timed.sh "build the lab's components" hack/components.sh $(LAB_COMPONENTS)
	hack/timed.sh "build Kubernetes (the lab's nodes)" hack/testbin.sh all
	GO=$(GO) E2E_PARALLEL=$(E2E_PARALLEL) hack/timed.sh "go test lab/e2e side by side (with the next two steps beside it)" hack/e2e.sh side-by-side \
	  'hack/timed.sh --beside "build Kubernetes $(OLDEST_KUBERNETES) (TestSmokeOldestKubernetes)" hack/testbin.sh --minor $(OLDEST_KUBERNETES) all' \
	  'hack/timed.sh --beside "fuzz" $(MAKE) --no-print-directory fuzz'
	GO=$(GO) hack/timed.sh "go test lab/e2e alone" hack/e2e.sh alone
	@hack/timed.sh --table

.PHONY: test-mesh
test-mesh: testbin ## Run TestMesh (as root): five clusters peered in a full mesh, pods and Services between every pair; about 2 minutes, outside make test.
	PEERLINK_MESH=1 $(GO) test -count=1 -v -timeout 60m -run '^TestMesh$$' $(E2E_PKG)

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME.
	@hack/fuzz.sh $(FUZZTIME)

.PHONY: bench
bench: testbin ## Print the benchmark tables (ratios measured side by side in one run); TABLES=dataplane,lab picks some.
	$(GO) run ./bench $(if $(TABLES),-only=$(TABLES))

.PHONY: lab
lab: ## Bring up the lab (two real clusters on this machine, as root) and peer them; see docs/lab.md.
	$(GO) run ./lab up
	$(GO) run ./lab demo

.PHONY: conformance
conformance: ## Run the Multi-Cluster Services conformance suite against two fresh peered lab clusters (as root): SUITE=<mcs-api checkout>/conformance, ARGS=<suite flags>; see docs/services.md.
	@test -n "$(SUITE)" || { echo "SUITE is required: make conformance SUITE=<checkout of kubernetes-sigs/mcs-api>/conformance"; exit 1; }
	$(GO) run ./lab conformance --suite '$(SUITE)' -- $(ARGS)

.PHONY: lab-down
lab-down: ## Remove the lab and everything it made on this machine.
	$(GO) run ./lab down
