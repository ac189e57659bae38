# Sourced (prepended) by the runners: `confined TARGET RW_DIR CMD...` runs CMD. On a host
# (VTB_CONFINE=1) CMD runs in a bubblewrap sandbox that holds even when the job-file gate is
# fooled. It sees, read-only, only what a tool needs to start: /usr (and the /bin, /lib links or
# folders), the loader's and the user database's files of /etc, /sys; a private, empty /tmp (its
# working directory, where fio keeps a verify state); a /dev with only the basic nodes and TARGET;
# TARGET (a device, or a file or folder) and RW_DIR (this run's own scratch folder, or empty)
# writable; everything else read-only and empty. No network unless it reaches Ceph (an rbd image,
# with its conf); its own PID, IPC and UTS namespaces; no capabilities, no new privileges, no
# real-time and no raised priority; where the host's cgroups can be written (v2, or v1's memory and
# pids), at most VTB_CONFINE_MEMORY_MIB of memory (half the host's) and VTB_CONFINE_TASKS tasks
# (1024). In a guest (nothing there but the disks under test) CMD runs as is.
# docs/what-vtb-touches.md says why.
confined() {
  c_target=$1 c_rw=$2
  shift 2
  if [ "${VTB_CONFINE:-}" != 1 ]; then "$@"; return; fi
  command -v bwrap >/dev/null ||
    { echo "bubblewrap (bwrap) is not installed on this host: vtb runs its tools there only in its sandbox. Fix: apt-get install bubblewrap" >&2; return 6; }
  # what the sandbox writes: the target, the scratch folder; then nothing else can be made
  set -- --remount-ro /dev --remount-ro / --chdir /tmp --setenv HOME /tmp -- "$@"
  [ -z "$c_rw" ] || set -- --bind "$c_rw" "$c_rw" "$@"
  case $c_target in
    /dev/*) set -- --dev-bind "$(readlink -f "$c_target")" "$c_target" "$@" ;;
    ?*) set -- --bind "$c_target" "$c_target" "$@" ;;
  esac
  if [ -n "${rbd_image:-}" ]; then   # librbd reaches the cluster over the network, with its conf
    # its conf and the client's keyring, wherever the conf puts it (as Ceph's own ceph-conf reads it)
    case ${CEPH_CONF:-} in /*) set -- --ro-bind "$CEPH_CONF" "$CEPH_CONF" "$@" ;; esac
    for f in $(ceph-conf ${CEPH_CONF:+-c "$CEPH_CONF"} --name "client.${FIO_RBD_ID:-admin}" --lookup keyring \
               2>/dev/null | tr ',; ' '\n\n\n'); do
      case $f in /*) [ ! -f "$f" ] || set -- --ro-bind "$f" "$f" "$@" ;; esac
    done
    set -- --ro-bind-try /etc/ceph /etc/ceph --ro-bind-try /etc/hosts /etc/hosts \
      --ro-bind-try /etc/resolv.conf /etc/resolv.conf "$@"
  else
    set -- --unshare-net "$@"
  fi
  for f in ld.so.cache ld.so.conf ld.so.conf.d localtime passwd group nsswitch.conf; do
    set -- --ro-bind-try "/etc/$f" "/etc/$f" "$@"
  done
  for d in /bin /sbin /lib /lib32 /lib64 /libx32; do   # links into /usr (merged /usr), or folders
    if [ -L "$d" ]; then set -- --symlink "$(readlink "$d")" "$d" "$@"
    elif [ -d "$d" ]; then set -- --ro-bind "$d" "$d" "$@"; fi
  done
  c_groups=$(confine_cgroups) ||
    { echo "the sandbox's cgroups could not be made on this host (see above)" >&2; return 6; }
  # the sandbox's first process joins the cgroups, then becomes the sandbox
  sh -c 'for d in $1; do echo $$ > "$d/cgroup.procs" || exit 6; done; shift; exec "$@"' confine "$c_groups" \
    prlimit --rtprio=0 --nice=0 -- bwrap --unshare-ipc --unshare-pid --unshare-uts --unshare-cgroup-try \
    --die-with-parent --new-session --cap-drop ALL --ro-bind /usr /usr --ro-bind /sys /sys --proc /proc \
    --dev /dev --tmpfs /tmp "$@"
  c_rc=$?
  for _ in $(seq 25); do   # empty once the sandbox's last process is reaped
    for d in $c_groups; do rmdir "$d" 2>/dev/null; done
    for d in $c_groups; do [ ! -d "$d" ] || { sleep 0.2; continue 2; }; done
    break
  done
  return $c_rc
}

# `confine_cgroups`: makes this sandbox's cgroups, `vtb-confine-<this shell's pid>`, with their
# ceilings, and prints their folders: one in cgroup v2 (at its root: below it the controllers
# can be taken only where no process is), or one each in v1's memory and pids hierarchies (below
# this shell's own). Those of sandboxes whose shell is gone (killed) are removed first. None on
# a host whose cgroups cannot be written (a container's read-only /sys/fs/cgroup).
confine_cgroups() {
  c_mem=$(( ${VTB_CONFINE_MEMORY_MIB:-$(awk '/^MemTotal:/ {print int($2 / 2048)}' /proc/meminfo)} << 20 ))
  c_tasks=${VTB_CONFINE_TASKS:-1024}
  stale_confine_cgroups_removed >/dev/null
  if [ -w /sys/fs/cgroup ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
     grep -qw pids /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    for c in memory pids; do
      grep -qw $c /sys/fs/cgroup/cgroup.subtree_control || echo +$c > /sys/fs/cgroup/cgroup.subtree_control || return 1
    done
    d=/sys/fs/cgroup/vtb-confine-$$
    mkdir -p "$d" && echo "$c_mem" > "$d/memory.max" && echo "$c_tasks" > "$d/pids.max" && echo "$d"
    return
  fi
  for c in memory pids; do
    own=$(awk -F: -v c=$c '$2 == c {print $3}' /proc/self/cgroup)
    base=/sys/fs/cgroup/$c${own%/}
    [ -n "$own" ] && [ -w "$base" ] || continue
    d=$base/vtb-confine-$$
    mkdir -p "$d" || return 1
    case $c in
      memory) echo "$c_mem" > "$d/memory.limit_in_bytes" ;;
      pids) echo "$c_tasks" > "$d/pids.max" ;;
    esac || return 1
    echo "$d"
  done
}

# `stale_confine_cgroups_removed`: the cgroups of sandboxes whose shell is gone, removed (each is
# empty once its sandbox died with its shell); prints each.
stale_confine_cgroups_removed() {
  find /sys/fs/cgroup -maxdepth 8 -type d -name 'vtb-confine-*' 2>/dev/null | while read -r d; do
    [ -d "/proc/${d##*-}" ] || ! rmdir "$d" 2>/dev/null || echo "cgroup $d"
  done
}

# `wiped DEV`: wipefs --all on a disk whose filesystem a sandbox had: the sandbox's mount namespace
# can hold the filesystem a moment after its tool exits (wipefs then finds it busy), so it is tried
# for up to 5 s.
wiped() {
  for _ in $(seq 25); do
    wipefs --all --quiet "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  wipefs --all --quiet "$1"
}
