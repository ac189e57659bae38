#!/usr/bin/env bash
# Builds a testbed image from Debian packages with mmdebstrap, cached by a hash of its recipe.
#   images/build.sh [guest]     the main job's VM image: the cloud kernel, fio and the guest agent
#                               ($VTB_CACHE/images/<hash>/, linked as images/current)
#   images/build.sh guest-full  the VM image of every workload: also the generic kernel, MariaDB and
#                               sysbench, RocksDB's db_bench, ioping, mdadm and the filesystems' tools
#                               ($VTB_CACHE/images/full-<hash>/, linked as images/full-current); the
#                               harness builds it on the first use of a fleet whose guests need it
#   images/build.sh host        the nested host (an L1 VM that plays the host: libvirtd, QEMU, mdadm),
#                               with the full guest image inside ($VTB_CACHE/images/host-<hash>/,
#                               linked as images/host-current)
# Each holds rootfs.qcow2 (ext4, label vtbroot), vmlinuz, initrd.img (the full image also
# vmlinuz-generic, initrd-generic.img), packages.txt (exact package versions, the image's bill of
# materials) and recipe.sha.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
role=${1:-guest}
CACHE=${VTB_CACHE:-/var/cache/vtb}
SUITE=bookworm
MIRROR=${VTB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# A fixed timestamp makes file times, the filesystem UUID and hash seed repeatable.
export SOURCE_DATE_EPOCH=1700000000
# Kernels: Debian's cloud kernel boots a TCG guest fastest (5.7 s to the agent against 9.1 s for
# the generic one, checked), but lacks f2fs and nilfs2, which the filesystems study needs. So the
# full guest image has both (vmlinuz/initrd.img: cloud; vmlinuz-generic/initrd-generic.img: generic,
# booted where a fleet asks for it: fleet.kernel), and the nested host has the generic one.
# The main job's image leaves out what only other workloads need: alone on a 2-core machine it
# builds in about 38 s against 53 s (checked), and a fresh machine builds it beside the venv and
# the provider, which compete for the same cores.
KERNELS=linux-image-cloud-amd64
PACKAGES=initramfs-tools,kmod,procps,util-linux,qemu-guest-agent,fio,e2fsprogs
FULL_KERNELS=$KERNELS,linux-image-amd64
FULL_PACKAGES=$PACKAGES,sysbench,mariadb-server,mdadm,xfsprogs,btrfs-progs,f2fs-tools,nilfs-tools,rocksdb-tools,ioping
hooks=()
free_mib=1024
# The hash of build.sh, the initramfs module list and the files of the folders named
recipe_key() { (cd "$here" && cat build.sh initramfs-modules && for d; do cat "$d"/*; done) | sha256sum | cut -c1-16; }
guest_key=$(recipe_key guest)
case $role in
guest)
  key=$guest_key
  link=current ;;
guest-full)
  KERNELS=$FULL_KERNELS PACKAGES=$FULL_PACKAGES
  key=full-$guest_key
  link=full-current ;;
host)
  # libvirtd (no systemd: qemu.conf as scripts/libvirtd.sh sets it; no TCP listener: reached as
  # qemu+ssh through sshd, forwarded on loopback only), QEMU and qemu-storage-daemon for the L2 fleet, python3 for
  # the device safety checks (harness/resources/devices.py runs there as it runs here), sshd for hosts
  # driven as `ssh` hosts (its host key is made at boot, so every nested host has its own), and
  # Ceph for ceph.mode = "hosts" (its daemons, and QEMU's and fio's librbd for the L2s and the
  # physical baseline), tgt for the iscsi backend's target, and bubblewrap, the sandbox of the
  # tools vtb runs on a host (guest-agents/confine.sh).
  KERNELS=linux-image-amd64
  PACKAGES=$FULL_PACKAGES,libvirt-daemon,libvirt-daemon-driver-qemu,libvirt-clients,qemu-system-x86,qemu-utils,iproute2,python3,openssh-server
  PACKAGES+=,ceph-mon,ceph-mgr,ceph-osd,ceph-common,qemu-block-extra,tgt,bubblewrap
  hooks=(--customize-hook="copy-in $here/host/vtb-host-init /sbin"
         --customize-hook='chroot "$1" useradd --system --no-create-home --shell /usr/sbin/nologin libvirt-qemu'
         --customize-hook='printf "user = \"root\"\ngroup = \"root\"\nstdio_handler = \"file\"\n" >> "$1/etc/libvirt/qemu.conf"'
         --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*'
         --customize-hook='printf "log_outputs = \"3:file:/var/log/libvirt/libvirtd.log\"\n" >> "$1/etc/libvirt/libvirtd.conf"')
  free_mib=3072   # room for the L2 fleets' overlays, and a guest image of another recipe uploaded
  key=host-$(recipe_key guest host)
  link=host-current ;;
*) echo "usage: $0 [guest|guest-full|host]" >&2; exit 2 ;;
esac
out=$CACHE/images/$key
mkdir -p "$CACHE/images"
if [ -f "$out/rootfs.qcow2" ] && [ -f "$out/recipe.sha" ]; then
  ln -sfn "$key" "$CACHE/images/$link"
  echo "$role image: cached ($out)"
  exit 0
fi
for t in mmdebstrap mkfs.ext4 qemu-img; do
  command -v $t >/dev/null || { echo "error: $t is missing: run scripts/host-packages.sh" >&2; exit 1; }
done
if [ "$role" = host ]; then
  # The full guest image, which the nested host serves its L2 fleets, already where
  # harness/fleet/host_images.py would upload it (/var/lib/vtb/images/<recipe>-<file>): that upload,
  # through libvirt over ssh into a TCG L1, took 30-97 s per host. Its recipe is part of this image's key.
  "$here/build.sh" guest-full
  guest=$CACHE/images/full-$guest_key
  hooks+=(--customize-hook="mkdir -p \"\$1/var/lib/vtb/images\" && for f in rootfs.qcow2 vmlinuz initrd.img \
vmlinuz-generic initrd-generic.img; do cp '$guest/'\$f \"\$1/var/lib/vtb/images/full-$guest_key-\$f\"; done")
fi
work=$(mktemp -d "$CACHE/images/.build-XXXXXX")
echo $$ > "$work/builder.pid"   # a build killed outright leaves its tree: `harness gc` removes it (harness/resources/image_builds.py)
# An interrupted mmdebstrap can leave /proc, /sys or /dev mounted in the tree: unmount before removing,
# and never let rm cross into another filesystem. bash runs no EXIT trap when a signal kills it: exit on one.
cleanup() {
  awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "$role image: building $SUITE with mmdebstrap (about 2 min)"
# Kernel modules no guest or nested host here loads (graphics, media, sound, radios, InfiniBand)
# are left out: they were some 40% of the image.
module_excludes=()
for d in drivers/gpu drivers/media drivers/net/wireless drivers/infiniband drivers/staging drivers/bluetooth \
         drivers/iio drivers/isdn sound net/wireless net/mac80211 net/bluetooth; do
  module_excludes+=(--dpkgopt="path-exclude=/lib/modules/*/kernel/$d/*")
done
# /etc/mtab is made by the build: systemd makes it on an ordinary boot, and mkfs.nilfs2 will not run without it.
mmdebstrap --variant=minbase --mode=root --include="$KERNELS,$PACKAGES" "${module_excludes[@]}" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && printf "MODULES=list\nCOMPRESS=zstd\n" > "$1/etc/initramfs-tools/conf.d/vtb"' \
  --customize-hook="grep -v '^#' '$here/initramfs-modules' >> \"\$1/etc/initramfs-tools/modules\"" \
  --customize-hook='cd "$1/usr/share/initramfs-tools" && rm -f hooks/mdadm hooks/btrfs scripts/*/mdadm scripts/*/btrfs' \
  --customize-hook='chroot "$1" update-initramfs -u -k all' \
  --customize-hook="copy-in $here/guest/vtb-init /sbin" \
  --customize-hook='printf "127.0.0.1 localhost vtb-guest\n::1 localhost\n" > "$1/etc/hosts"' \
  --customize-hook='ln -sfn ../proc/self/mounts "$1/etc/mtab"' \
  --customize-hook='echo vtb-guest > "$1/etc/hostname"' \
  "${hooks[@]}" \
  --customize-hook='chroot "$1" dpkg-query -W -f="\${Package}=\${Version}\n" > "$1/.packages.txt"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  "$SUITE" "$work/root" "$MIRROR"
mkdir -p "$work/out"
mv "$work/root/.packages.txt" "$work/out/packages.txt"
# vmlinuz/initrd.img: the cloud kernel where there is one, else the generic one; the generic one,
# where there is one, also as vmlinuz-generic/initrd-generic.img.
generic=$(cd "$work/root/boot" && ls vmlinuz-*-amd64 | grep -v cloud | head -n 1 || true)
cloud=$(cd "$work/root/boot" && ls vmlinuz-*-cloud-amd64 2>/dev/null | head -n 1 || true)
default=${cloud:-$generic}
cp "$work/root/boot/$default" "$work/out/vmlinuz"
cp "$work/root/boot/initrd.img-${default#vmlinuz-}" "$work/out/initrd.img"
if [ -n "$generic" ]; then
  cp "$work/root/boot/$generic" "$work/out/vmlinuz-generic"
  cp "$work/root/boot/initrd.img-${generic#vmlinuz-}" "$work/out/initrd-generic.img"
fi
size_mib=$(( $(du -sm "$work/root" | cut -f1) + free_mib ))
mkfs.ext4 -q -L vtbroot -U 6b1c6a2e-0000-4000-8000-000000000001 -E hash_seed=6b1c6a2e-0000-4000-8000-000000000002 \
  -d "$work/root" "$work/rootfs.raw" "${size_mib}M"
# The guest image is uploaded into every nested and SSH host: compressed (zstd) it is a third of
# the bytes; QEMU decompresses a cluster as it reads it. The host image stays as it is.
compress=()
[ "$role" != host ] && compress=(-c -o compression_type=zstd)
qemu-img convert "${compress[@]}" -O qcow2 "$work/rootfs.raw" "$work/out/rootfs.qcow2"
echo "$key" > "$work/out/recipe.sha"
rm -rf "$out" && mv "$work/out" "$out"
ln -sfn "$key" "$CACHE/images/$link"
echo "$role image: built $out ($(du -sh "$out/rootfs.qcow2" | cut -f1) qcow2)"
