#!/usr/bin/env bash
# start|stop libvirtd without assuming systemd. `start` records the PID only when it started
# the daemon itself, so `stop` stops exactly what the testbed started and nothing else.
set -euo pipefail
RUN=${VTB_RUN_DIR:-/run/vtb}
pidfile=$RUN/libvirtd.pid
conf=/etc/libvirt/qemu.conf
orig=$conf.vtb-orig   # qemu.conf as it was before the testbed's first start, put back by `stop`

running() { virsh -c qemu:///system version >/dev/null 2>&1; }
# a hugetlbfs of the host's own (a fleet's SPDK mount, under a vtb- path, comes and goes)
hugetlbfs_mounted() { awk '$3 == "hugetlbfs" && $2 !~ /vtb-/ {found=1} END {exit !found}' /proc/mounts; }

set_conf() { # key value: set `key = value` in qemu.conf, replacing any earlier setting
  local k=$1 v=$2
  if grep -Eq "^\s*$k\s*=" "$conf"; then
    sed -i -E "s|^\s*$k\s*=.*|$k = $v|" "$conf"
  else
    echo "$k = $v" >> "$conf"
  fi
}

restore_conf() {
  if [ -f "$orig" ]; then mv "$orig" "$conf" && echo "libvirtd: $conf restored as it was"; fi
}

stop() {
  [ -f "$pidfile" ] || { echo "libvirtd: not started by the testbed; leaving it alone"; restore_conf; return 0; }
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    echo "libvirtd: stopped (pid $pid)"
  fi
  rm -f "$pidfile"
  restore_conf
}

case ${1:-start} in
start)
  if running && ! hugetlbfs_mounted && [ -f "$pidfile" ]; then
    echo "libvirtd: restarting the one the testbed started, so that it sees a hugetlbfs mount"
    stop
  fi
  if running; then echo "libvirtd: already running"; exit 0; fi
  # libvirt gives guests hugepages (SPDK's vhost target needs them) only where it saw a hugetlbfs
  # mount when it started; systemd mounts /dev/hugepages, so without it the testbed does (no
  # pages are reserved by the mount itself).
  mkdir -p "$RUN"
  if ! hugetlbfs_mounted; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages && touch "$RUN/hugetlbfs.mounted"
  fi
  # Debian's libvirtd looks this user up even when qemu runs as root.
  id libvirt-qemu >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin libvirt-qemu
  mkdir -p /var/log/libvirt/qemu /var/lib/libvirt/qemu /var/run/libvirt "$RUN"
  # Without systemd there is no virtlogd socket: let QEMU write its log files itself. The first
  # change keeps the original (a start after a crash keeps the first copy, not its own edit).
  [ -f "$orig" ] || [ ! -f "$conf" ] || cp -p "$conf" "$orig"
  set_conf user '"root"'
  set_conf group '"root"'
  set_conf stdio_handler '"file"'
  libvirtd -d --pid-file /var/run/libvirtd.pid
  for _ in $(seq 1 50); do running && break; sleep 0.2; done
  running || { echo "error: libvirtd did not come up; see /var/log/libvirt/libvirtd.log" >&2; exit 1; }
  cat /var/run/libvirtd.pid > "$pidfile"
  echo "libvirtd: started (pid $(cat "$pidfile"))"
  ;;
stop)
  stop
  if [ -f "$RUN/hugetlbfs.mounted" ]; then
    if umount /dev/hugepages 2>/dev/null; then
      rm -f "$RUN/hugetlbfs.mounted"
      echo "hugetlbfs: unmounted /dev/hugepages (the testbed mounted it)"
    else
      echo "warning: /dev/hugepages (mounted by the testbed) is busy; left mounted, the next stop tries again" >&2
    fi
  fi
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
