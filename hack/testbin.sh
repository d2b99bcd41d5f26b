#!/usr/bin/env bash
# Builds Kubernetes binaries from upstream source into bin/k8s/<version>/ and
# points bin/k8s/v<minor>, and bin/k8s/current for the default release, at
# that directory.
#
# Usage: hack/testbin.sh [--minor 1.N] [component...]
#
# Components: kube-apiserver kube-controller-manager kubectl etcd (the default
# set, used by tests through KUBEBUILDER_ASSETS=bin/k8s/current) and
# kube-scheduler kubelet kube-proxy (for the lab); "all" selects all seven.
#
# The version is the one of k8s.io/kubernetes in hack/kube/go.mod, the pin of
# the default release; --minor 1.N takes the release pinned in
# hack/kube-1.N/go.mod instead (the older minors the project supports and
# tests), or hack/kube's when it is that minor. A binary that already exists is not rebuilt, so a second run returns at
# once. Modules come through the Go module proxy, so a fresh clone with an
# empty module cache works.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kube_mod="$root/hack/kube"
# current: this run builds the default release.
current=1

default_components=(kube-apiserver kube-controller-manager kubectl etcd)
all_components=(kube-apiserver kube-controller-manager kubectl etcd kube-scheduler kubelet kube-proxy)

log() {
	printf 'testbin: %s\n' "$*" >&2
}

die() {
	log "error: $*"
	exit 1
}

# package_of prints the Go package that builds a component (relative to
# hack/kube).
package_of() {
	case "$1" in
	etcd) echo ./etcd ;;
	kube-apiserver | kube-controller-manager | kubectl | kube-scheduler | kubelet | kube-proxy)
		echo "k8s.io/kubernetes/cmd/$1"
		;;
	*) return 1 ;;
	esac
}

# require_version prints the version a require directive of $kube_mod/go.mod
# gives to module $1 (single-line or block form).
require_version() {
	awk -v mod="$1" '
		/^[[:space:]]*\/\// { next }
		/^replace/ { inreplace = ($2 == "(") ; next }
		inreplace && /^\)/ { inreplace = 0; next }
		inreplace { next }
		{
			for (i = 1; i < NF; i++)
				if ($i == mod && $(i + 1) ~ /^v[0-9]/) { print $(i + 1); exit }
		}
	' "$kube_mod/go.mod"
}

if [[ "${1-}" == --minor ]]; then
	[[ $# -ge 2 && "$2" =~ ^v?1\.[0-9]+$ ]] || die "--minor takes a minor release such as 1.35"
	minor=${2#v}
	shift 2
	default=$(require_version k8s.io/kubernetes)
	if [[ "$default" != "v$minor."* ]]; then
		[[ -f "$root/hack/kube-$minor/go.mod" ]] ||
			die "Kubernetes $minor is not pinned here: hack/kube pins $default, and the other pins are hack/kube-1.*: $(cd "$root/hack" && echo kube-1.*)"
		kube_mod="$root/hack/kube-$minor"
		current=
	fi
fi

version=$(require_version k8s.io/kubernetes)
[[ -n "$version" ]] || die "no require of k8s.io/kubernetes in ${kube_mod#"$root/"}/go.mod"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "unexpected Kubernetes version $version in ${kube_mod#"$root/"}/go.mod"
kube_minor=${BASH_REMATCH[1]}
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

# Every staging module must be replaced by the release matching the pin.
mismatch=$(awk -v want="$staging_version" '
	{ o = ($1 == "replace") ? 1 : 0 }
	$(1 + o) ~ /^k8s\.io\// && $(2 + o) == "=>" && $(4 + o) != want { print $(1 + o) " => " $(3 + o) " " $(4 + o) }
' "$kube_mod/go.mod")
[[ -z "$mismatch" ]] || die "${kube_mod#"$root/"}/go.mod pins k8s.io/kubernetes $version but replaces staging modules with other versions than $staging_version:
$mismatch"

components=()
if [[ $# -eq 0 ]]; then
	components=("${default_components[@]}")
else
	for c in "$@"; do
		if [[ "$c" == all ]]; then
			components+=("${all_components[@]}")
		elif package_of "$c" >/dev/null; then
			components+=("$c")
		else
			die "unknown component $c (known: ${all_components[*]} all)"
		fi
	done
fi

dest="$root/bin/k8s/$version"
mkdir -p "$dest"

missing=()
for c in "${components[@]}"; do
	if [[ -x "$dest/$c" ]]; then
		log "$c present in bin/k8s/$version"
	elif [[ " ${missing[*]-} " != *" $c "* ]]; then
		missing+=("$c")
	fi
done

export GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

if [[ ${#missing[@]} -gt 0 ]]; then
	cd "$kube_mod"
	start=$SECONDS

	log "downloading k8s.io/kubernetes $version and its dependencies through the module proxy"
	go mod download

	# Version stamps as set by the Kubernetes build (hack/lib/version.sh): the
	# commit and date come from the module proxy's record of the tag, so that
	# the binaries are reproducible.
	info=$(go mod download -json "k8s.io/kubernetes@$version")
	commit=$(sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)",\{0,1\}$/\1/p' <<<"$info" | head -n1)
	info_file=$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$info" | head -n1)
	build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info_file" 2>/dev/null || true)
	ldflags="-s -w"
	stamp() {
		ldflags+=" -X k8s.io/client-go/pkg/version.$1=$2 -X k8s.io/component-base/version.$1=$2"
	}
	stamp gitVersion "$version"
	stamp gitMajor 1
	stamp gitMinor "$kube_minor"
	stamp gitTreeState clean
	[[ -z "$commit" ]] || stamp gitCommit "$commit"
	[[ -z "$build_date" ]] || stamp buildDate "$build_date"

	packages=()
	for c in "${missing[@]}"; do
		packages+=("$(package_of "$c")")
	done

	# One go build for all binaries shares the compilation of common packages.
	# All of them, kubelet included, build without cgo.
	tmp=$(mktemp -d "$dest/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	log "building ${missing[*]} ($version, CGO_ENABLED=0); a cold build of all components takes several minutes"
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${packages[@]}"
	for c in "${missing[@]}"; do
		mv -f "$tmp/$c" "$dest/$c"
		log "built $c"
	done
	log "done in $((SECONDS - start))s"
fi

# Stable names (v1.N for the lab, current for KUBEBUILDER_ASSETS), each
# replaced atomically, through a temporary link of this run's own: labs side
# by side run this script at the same time.
links=("v1.$kube_minor")
[[ -z "$current" ]] || links+=(current)
for link in "${links[@]}"; do
	ln -sfn "$version" "$root/bin/k8s/.$link.$$.tmp"
	mv -Tf "$root/bin/k8s/.$link.$$.tmp" "$root/bin/k8s/$link"
	log "bin/k8s/$link -> $version"
done
