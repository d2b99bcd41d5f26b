#!/usr/bin/env bash
# Builds the cluster components the lab runs the way users run them, from
# upstream source, into bin/:
#
#   source-controller, kustomize-controller  bin/flux/<version>/
#       with the Flux CRDs in bin/flux/<version>/crds/ and each controller's
#       upstream kustomize bases (CRDs, RBAC, Deployment) in
#       bin/flux/<version>/config/<controller>/
#   coredns                                  bin/coredns/<version>/
#   flanneld                                 bin/flannel/<version>/
#       with upstream's DaemonSet manifest, kube-flannel.yml, beside it
#   helm                                     bin/helm/<version>/
#       the Helm CLI, which renders and packages bundles/helm/peerlink and
#       installs it in the lab
#   metallb-controller, metallb-speaker      bin/metallb/<version>/
#       MetalLB's controller and speaker, the lab's load balancer in L2
#       mode; the lab installs them from the upstream module's own config/
#
# and points bin/<name>/current at each version directory.
#
# Usage: hack/components.sh [component...]   (default: all seven)
#
# Each component is pinned in a module of its own under hack/ (hack/flux/
# source-controller, hack/flux/kustomize-controller, hack/coredns,
# hack/flannel, hack/helm, hack/metallb): its go.mod requires the upstream module at one
# version with the replace directives upstream's own go.mod has, so the build
# list is upstream's. The two Flux controllers must be pinned at the same version.
# A binary that already exists is not rebuilt, so a second run returns at
# once. Modules come through the Go module proxy.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

all_components=(source-controller kustomize-controller coredns flanneld helm metallb-controller metallb-speaker)

log() {
	printf 'components: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

# Per component: the module under hack/ that pins it, the upstream module
# (whose version names the output directory), its main package (the
# module's root but for Helm and MetalLB), and the directory under bin/.
module_dir_of() {
	case "$1" in
	source-controller | kustomize-controller) echo "hack/flux/$1" ;;
	coredns) echo hack/coredns ;;
	flanneld) echo hack/flannel ;;
	helm) echo hack/helm ;;
	metallb-controller | metallb-speaker) echo hack/metallb ;;
	*) return 1 ;;
	esac
}

upstream_of() {
	case "$1" in
	source-controller) echo github.com/fluxcd/source-controller ;;
	kustomize-controller) echo github.com/fluxcd/kustomize-controller ;;
	coredns) echo github.com/coredns/coredns ;;
	flanneld) echo github.com/flannel-io/flannel ;;
	helm) echo helm.sh/helm/v3 ;;
	metallb-controller | metallb-speaker) echo go.universe.tf/metallb ;;
	*) return 1 ;;
	esac
}

main_package_of() {
	case "$1" in
	helm) echo helm.sh/helm/v3/cmd/helm ;;
	metallb-controller) echo go.universe.tf/metallb/controller ;;
	metallb-speaker) echo go.universe.tf/metallb/speaker ;;
	*) upstream_of "$1" ;;
	esac
}

bin_name_of() {
	case "$1" in
	source-controller | kustomize-controller) echo flux ;;
	coredns) echo coredns ;;
	flanneld) echo flannel ;;
	helm) echo helm ;;
	metallb-controller | metallb-speaker) echo metallb ;;
	*) return 1 ;;
	esac
}

export GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# Temporary directories under bin/, removed however the script ends.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

# version_of prints the version the pinning module selects for the upstream
# module of component $1.
version_of() {
	local v
	v=$(cd "$root/$(module_dir_of "$1")" && go list -m -f '{{.Version}}' "$(upstream_of "$1")") ||
		die "cannot read the version of $(upstream_of "$1") from $(module_dir_of "$1")/go.mod"
	[[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "unexpected version $v of $(upstream_of "$1") in $(module_dir_of "$1")/go.mod"
	echo "$v"
}

# module_field prints field $2 (Dir, Info, ...) of `go mod download -json`
# for module $1, run in the pinning module $3.
module_field() {
	(cd "$root/$3" && go mod download -json "$1") |
		sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1
}

# smoke runs a built binary with a flag that only prints, so that a binary
# that cannot start fails the script.
smoke() {
	local c=$1 bin=$2 flag out
	case "$c" in
	coredns) flag=-version ;;
	flanneld) flag=--version ;;
	helm) flag=version ;;
	*) flag=--help ;;
	esac
	out=$("$bin" "$flag" 2>&1) || die "$c $flag failed: $out"
	log "$c $flag: $(head -n1 <<<"${out//$bin/$c}")"
}

build() {
	local c=$1 version=$2 dest=$3
	local mod upstream pkg ldflags start cgo=0 tags=""
	mod=$(module_dir_of "$c")
	upstream=$(upstream_of "$c")
	pkg=$(main_package_of "$c")
	ldflags="-s -w"
	case "$c" in
	coredns)
		local hash
		hash=$(module_field "$upstream@$version" Hash "$mod" || true)
		[[ -z "$hash" ]] || ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=${hash:0:7}"
		;;
	flanneld)
		ldflags+=" -X github.com/flannel-io/flannel/pkg/version.Version=$version"
		# flannel's UDP backend is written in C on amd64 and flanneld links
		# every backend, so it needs cgo there (upstream builds it the same
		# way). Linked statically, with Go's resolver and user lookup, it
		# needs no libc at run time and runs in an image with nothing else.
		if [[ "$(go env GOARCH)" == amd64 ]]; then
			command -v "$(go env CC)" >/dev/null || die "flanneld needs a C compiler on amd64: install gcc and libc6-dev (hack/install-deps.sh)"
			cgo=1
			tags=netgo,osusergo
			ldflags+=" -extldflags -static"
		fi
		;;
	helm)
		# As upstream's Makefile stamps a release: its version, and the
		# Kubernetes version it assumes when no cluster is asked (helm
		# template), the release of its client-go (v0.N is Kubernetes 1.N).
		local cg minor p
		cg=$(cd "$root/$mod" && go list -m -f '{{.Version}}' k8s.io/client-go) || die "cannot read the client-go version of $mod"
		[[ "$cg" =~ ^v0\.([0-9]+)\.[0-9]+$ ]] || die "unexpected client-go version $cg in $mod/go.mod"
		minor=${BASH_REMATCH[1]}
		ldflags+=" -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.metadata="
		ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
		for p in pkg/lint/rules pkg/chartutil; do
			ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
		done
		;;
	esac

	start=$SECONDS
	log "downloading the modules of $c $version through the module proxy"
	(cd "$root/$mod" && go list -deps "$pkg" >/dev/null)
	log "building $c $version (CGO_ENABLED=$cgo) after $((SECONDS - start))s of downloads; a cold build takes minutes"
	mkdir -p "$dest"
	local tmp
	tmp=$(mktemp -d "$dest/.build.XXXXXX")
	scratch+=("$tmp")
	(cd "$root/$mod" && CGO_ENABLED=$cgo go build -trimpath -buildvcs=false ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$tmp/$c" "$pkg") ||
		die "building $c $version failed"
	smoke "$c" "$tmp/$c"
	mv -f "$tmp/$c" "$dest/$c"
	log "built $c $version in $((SECONDS - start))s ($(du -m "$dest/$c" | cut -f1) MB)"
}

# copy_from_module copies directory $2 of module $1 (as pinned in module dir
# $3) to $4, writable, leaving out upstream's samples and test data.
copy_from_module() {
	local dir
	dir=$(module_field "$1" Dir "$3")
	[[ -n "$dir" && -d "$dir/$2" ]] || die "no $2 in $1"
	mkdir -p "$4"
	cp -R "$dir/$2/." "$4/"
	chmod -R u+w "$4"
	rm -rf "$4/samples" "$4/testdata"
}

# flux_manifests extracts the CRDs and kustomize bases of both controllers
# from the modules that built them, unless they are there.
flux_manifests() {
	local version=$1 dest=$2 c tmp
	[[ -d "$dest/crds" ]] && return 0
	tmp=$(mktemp -d "$dest/.manifests.XXXXXX")
	scratch+=("$tmp")
	for c in source-controller kustomize-controller; do
		copy_from_module "$(upstream_of "$c")@$version" config "$(module_dir_of "$c")" "$tmp/config/$c"
	done
	mkdir -p "$tmp/crds"
	cp "$tmp"/config/*/crd/bases/*.yaml "$tmp/crds/"
	mv "$tmp/config" "$dest/config"
	mv "$tmp/crds" "$dest/crds"
	log "Flux CRDs in bin/flux/$version/crds: $(cd "$dest/crds" && ls | tr '\n' ' ')"
}

flannel_manifest() {
	local version=$1 dest=$2 dir
	[[ -f "$dest/kube-flannel.yml" ]] && return 0
	dir=$(module_field "$(upstream_of flanneld)@$version" Dir "$(module_dir_of flanneld)")
	[[ -f "$dir/Documentation/kube-flannel.yml" ]] || die "no Documentation/kube-flannel.yml in flannel $version"
	install -m 0644 "$dir/Documentation/kube-flannel.yml" "$dest/kube-flannel.yml"
	log "flannel DaemonSet in bin/flannel/$version/kube-flannel.yml"
}

components=()
if [[ $# -eq 0 ]]; then
	components=("${all_components[@]}")
else
	for c in "$@"; do
		module_dir_of "$c" >/dev/null || die "unknown component $c (known: ${all_components[*]})"
		[[ " ${components[*]-} " == *" $c "* ]] || components+=("$c")
	done
fi

if [[ " ${components[*]} " == *" source-controller "* || " ${components[*]} " == *" kustomize-controller "* ]]; then
	sc=$(version_of source-controller)
	kc=$(version_of kustomize-controller)
	[[ "$sc" == "$kc" ]] ||
		die "hack/flux pins source-controller $sc and kustomize-controller $kc: pin both at one Flux release"
fi

total=$SECONDS
for c in "${components[@]}"; do
	version=$(version_of "$c")
	name=$(bin_name_of "$c")
	dest="$root/bin/$name/$version"
	if [[ -x "$dest/$c" ]]; then
		log "$c present in bin/$name/$version"
	else
		build "$c" "$version" "$dest"
	fi
	case "$c" in
	source-controller | kustomize-controller) flux_manifests "$version" "$dest" ;;
	flanneld) flannel_manifest "$version" "$dest" ;;
	esac
	# Stable name, replaced atomically; the temporary link is this run's
	# own, as labs side by side run this script at the same time.
	ln -sfn "$version" "$root/bin/$name/.current.$$.tmp"
	mv -Tf "$root/bin/$name/.current.$$.tmp" "$root/bin/$name/current"
done
log "done in $((SECONDS - total))s"
