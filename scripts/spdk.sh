#!/usr/bin/env bash
# Builds SPDK's vhost target from a source archive or tree, against Debian's DPDK 22.11, into the
# cache, keyed by a hash of this recipe and of the source. Prints the build's directory last
# (it holds bin/vhost and lib/).
#
# Source, first found: $VTB_SPDK_SOURCE (a .tar.gz or a source tree), else ../shared/vendor's
# spdk-*.tar.gz beside the checkout. With none, it exits 3 and says how to provide one.
# A build you made yourself needs no script: set disk.spdk_build to its build/ folder.
# --optional: no source is not an error (`make` builds SPDK where a source is at hand).
set -euo pipefail
CACHE=${VTB_CACHE:-/var/cache/vtb}
here=$(cd "$(dirname "$0")" && pwd)

source=${VTB_SPDK_SOURCE:-}
if [ -z "$source" ]; then
  source=$(ls "$here"/../../shared/vendor/spdk-*.tar.gz 2>/dev/null | sort | tail -n 1 || true)
fi
if [ -z "$source" ] || [ ! -e "$source" ]; then
  [ "${1:-}" = --optional ] && { echo "spdk: no source (VTB_SPDK_SOURCE, ../shared/vendor): vhost-user-blk-spdk will be listed as unavailable"; exit 0; }
  echo "error: no SPDK source: set VTB_SPDK_SOURCE to an SPDK v25.09 source archive or tree," \
       "or disk.spdk_build to an SPDK build/ folder you made (with bin/vhost)" >&2
  exit 3
fi
source=$(realpath "$source")
if [ -d "$source" ]; then   # a tree: its tracked content, not its build products, names the build
  src_key=$( (cd "$source" && find . -path ./build -prune -o -path ./dpdk -prune -o -name '*.o' -prune -o \
             -type f \( -name '*.c' -o -name '*.h' -o -name configure -o -name Makefile -o -name '*.mk' \) -print0 \
             | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
else
  src_key=$(sha256sum "$source" | cut -c1-16)
fi
key=$( (sha256sum "$here/spdk.sh" | cut -c1-16; echo "$src_key") | sha256sum | cut -c1-16)
out=$CACHE/spdk/$key
if [ -x "$out/bin/vhost" ]; then
  ln -sfn "$key" "$CACHE/spdk/current"   # the build the harness uses
  echo "spdk: cached ($out)"
  echo "$out"
  exit 0
fi

"$here/host-packages.sh" --spdk-build   # its build dependencies (apt), only when it is built

mkdir -p "$CACHE/spdk"
work=$(mktemp -d "$CACHE/spdk/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "spdk: building from $source (1 min on the development machine's 2 cores, up to 5; cached afterwards in $out)"
t0=$SECONDS
if [ -d "$source" ]; then
  cp -a "$source" "$work/src"
else
  mkdir "$work/src" && tar -xzf "$source" -C "$work/src" --strip-components=1
fi
cd "$work/src"
# A source archive has no git submodules, and configure insists on isa-l on x86_64 unless nasm is
# missing or older than 2.14: an empty isa-l/autogen.sh, and for configure a nasm that says it is
# too old, make it build with CONFIG_ISAL=n (a real nasm elsewhere on PATH would not).
[ -e isa-l/autogen.sh ] || { mkdir -p isa-l && : > isa-l/autogen.sh && chmod +x isa-l/autogen.sh; }
mkdir -p "$work/shim" && printf '#!/bin/sh\necho "NASM version 2.0"\n' > "$work/shim/nasm" && chmod +x "$work/shim/nasm"
# SPDK v25.09 refuses DPDK 22.11 minor versions above 4 at start-up, even with --no-pci; Debian
# ships 22.11.11, whose ABI for what SPDK uses is the same.
grep -q 'if (minor > 4) {' lib/env_dpdk/pci_dpdk.c \
  || { echo "error: lib/env_dpdk/pci_dpdk.c has no DPDK 22.11 minor-version check to relax: an SPDK other than v25.09?" >&2; exit 1; }
sed -i 's/if (minor > 4) {/if (minor > 99) {/' lib/env_dpdk/pci_dpdk.c
PATH="$work/shim:$PATH" ./configure --with-dpdk --disable-tests --disable-unit-tests --disable-examples --without-crypto >"$work/configure.log" 2>&1 \
  || { tail -n 30 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
mkdir -p "$work/out/bin"
cp build/bin/vhost "$work/out/bin/"
cp -a build/lib "$work/out/lib"
cp VERSION "$work/out/VERSION" 2>/dev/null || true   # recorded with every sample
echo "$source" > "$work/out/SOURCE"
rm -rf "$out" && mv "$work/out" "$out"
ln -sfn "$key" "$CACHE/spdk/current"   # the build the harness uses
echo "spdk: built in $((SECONDS - t0)) s"
echo "$out"
