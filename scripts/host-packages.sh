#!/usr/bin/env bash
# Installs the host packages the testbed needs (with --test, also what the tests need: Chromium
# renders the HTML report, sfdisk writes a partition table to refuse; with --spdk-build, what
# scripts/spdk.sh builds SPDK with). Idempotent: skips apt when all are present.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
      libvirt-dev pkg-config xsltproc mmdebstrap fio e2fsprogs util-linux ca-certificates
      python3-venv python3-dev gcc git
      mariadb-server-core mariadb-client-core sysbench curl unzip openssh-client
      ceph-mon ceph-mgr ceph-osd ceph-common qemu-block-extra iproute2 tgt ioping bubblewrap)
for arg in "$@"; do
  case $arg in
    --test) pkgs+=(chromium fdisk) ;;
    --spdk-build) pkgs+=(libdpdk-dev dpdk-dev libaio-dev libssl-dev uuid-dev libnuma-dev libjson-c-dev libncurses-dev
                         libkeyutils-dev libfuse3-dev python3-pyelftools meson ninja-build libcunit1-dev libbsd-dev
                         libarchive-dev g++ make) ;;
    *) echo "usage: $0 [--test] [--spdk-build]" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "host packages: all present"
  exit 0
fi
echo "host packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"$(dirname "$0")/apt-lock-wait.sh"
# Lists can be stale on a fresh machine; some package indices may be unreachable, so tolerate that.
apt-get update -qq || echo "warning: apt-get update reported errors; trying the install anyway" >&2
"$(dirname "$0")/apt-lock-wait.sh"
apt-get install -y -qq -o DPkg::Lock::Timeout="${VTB_APT_LOCK_WAIT_S:-600}" --no-install-recommends "${missing[@]}"
# tgt's package starts a system-wide target on every address (port 3260) where systemd runs; the
# iscsi backend runs its own tgtd per fleet on loopback, so the one vtb just installed is stopped.
if [[ " ${missing[*]} " == *" tgt "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now tgt.service || true
fi
