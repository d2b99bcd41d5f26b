#!/usr/bin/env bash
# Installs the Debian packages the tests and the lab need. Idempotent; run as root.
set -euo pipefail
packages=(
  iproute2 nftables iputils-ping ca-certificates git make
  iptables # with ip6tables, which kube-proxy and the lab's masquerade use on IPv6 clusters
  containerd runc containernetworking-plugins conntrack util-linux
  iperf3 wireguard-tools
  socat netcat-openbsd busybox-static # the lab's tool images (lab/internal/images/tools.go)
  gcc libc6-dev # flanneld links flannel's C UDP backend on amd64 (hack/components.sh)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
