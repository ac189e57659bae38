#!/usr/bin/env bash
# Installs host packages, only the missing ones; idempotent (skips apt when all are present).
#   scripts/host-packages.sh            what the main job needs (`make testbed up`)
#   scripts/host-packages.sh --all      also what every experiment and backend needs (MariaDB and
#                                       sysbench, Ceph, tgt, ioping): `make bootstrap`, `make test`
#   --test          also what the tests need (Chromium renders the HTML report, sfdisk writes a
#                   partition table to refuse)
#   --spdk-build    what scripts/spdk.sh builds SPDK with
#   --packages P..  these packages (the harness installs a plug-in's on its first use; each is in
#                   the --all list, which a unit test checks)
#   --list          print the packages instead of installing them
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
      libvirt-dev pkg-config xsltproc mmdebstrap fio e2fsprogs util-linux ca-certificates
      python3-venv python3-dev gcc git curl unzip openssh-client iproute2 bubblewrap)
all=(mariadb-server-core mariadb-client-core sysbench ceph-mon ceph-mgr ceph-osd ceph-common qemu-block-extra
     tgt ioping)
list=0
while [ $# -gt 0 ]; do
  case $1 in
    --all) pkgs+=("${all[@]}") ;;
    --test) pkgs+=(chromium fdisk) ;;
    --spdk-build) pkgs+=(libdpdk-dev dpdk-dev libaio-dev libssl-dev uuid-dev libnuma-dev libjson-c-dev libncurses-dev
                         libkeyutils-dev libfuse3-dev python3-pyelftools meson ninja-build libcunit1-dev libbsd-dev
                         libarchive-dev g++ make) ;;
    --list) list=1 ;;
    --packages) shift; pkgs=("$@"); break ;;
    *) echo "usage: $0 [--all] [--test] [--spdk-build] [--list] | --packages PACKAGE..." >&2; exit 2 ;;
  esac
  shift
done
[ "$list" = 1 ] && { printf '%s\n' "${pkgs[@]}"; exit 0; }
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
