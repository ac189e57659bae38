# Sourced (prepended) by the runners: `confined TARGET RW_DIR CMD...` runs CMD. On a host
# (VTB_CONFINE=1) CMD runs in a bubblewrap sandbox that holds even when the job-file gate is
# fooled. It sees, read-only, only what a tool needs to start: /usr (and the /bin, /lib links or
# folders), the loader's and the user database's files of /etc, /sys; a private, empty /tmp (its
# working directory, where fio keeps a verify state); a /dev with only the basic nodes and TARGET;
# TARGET (a device, or a file or folder) and RW_DIR (this run's own scratch folder, or empty)
# writable; everything else read-only and empty. No network unless it reaches Ceph (an rbd image,
# with its conf); its own PID, IPC and UTS namespaces; no capabilities, no new privileges, no
# real-time and no raised priority; where the host's cgroups can be had, its tasks and (with every
# sandbox's) its memory under ceilings (confine_cgroups). In a guest (nothing there but the disks
# under test) CMD runs as is.
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
  c_groups=$(confine_cgroups)
  # the sandbox's first process joins its cgroups, then becomes the sandbox. The tool is the PID
  # namespace's first process (--as-pid-1): under bwrap's own reaper there its CPU time reached no
  # one (the runner's `times`, the harness's waited-for children: 0 s, checked), so a point counted
  # the tool's own CPU as other work on the host.
  sh -c 'for d in $1; do
           echo $$ 2>/dev/null > "$d/cgroup.procs" || { echo "vtb: this sandbox could not join its cgroup $d" >&2; break; }
         done; shift; exec "$@"' confine "$c_groups" \
    prlimit --rtprio=0 --nice=0 -- bwrap --unshare-ipc --unshare-pid --as-pid-1 --unshare-uts --unshare-cgroup-try \
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

# `confine_cgroups`: this sandbox's cgroups, made, their folders printed. Each is a child,
# `<pid>-<start time>` of this shell, of a parent `vtb-confine` that every sandbox of the host
# shares: the parent holds their memory together under the host's less a reserve (a runaway tool
# is killed, not the host's processes; high enough that page cache and writeback behave as
# without it), each child its tasks under VTB_CONFINE_TASKS (1024) and, where a test asks,
# VTB_CONFINE_MEMORY_MIB. In cgroup v2 the parent is at the root (below it, controllers can be
# taken only where no process is); in v1 one is in each of the memory and pids hierarchies, below
# this shell's own. The children of sandboxes whose shell is gone are removed first. Where the
# host's cgroups cannot be had (a container's), none, and a line on stderr says so: the rest of
# the sandbox holds without them.
confine_cgroups() {
  c_total=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  c_most=$(( (c_total - (c_total / 10 > 1024 ? c_total / 10 : 1024)) << 20 ))
  c_me=$$-$(cut -d' ' -f22 /proc/$$/stat) c_parents="" c_made=""
  if [ ! -e /sys/fs/cgroup/cgroup.type ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
     grep -qw pids /sys/fs/cgroup/cgroup.controllers; then   # the root of a cgroup v2 hierarchy
    c_parents=/sys/fs/cgroup/vtb-confine
    { grep -qw memory /sys/fs/cgroup/cgroup.subtree_control && grep -qw pids /sys/fs/cgroup/cgroup.subtree_control ||
        echo "+memory +pids" > /sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null &&
      mkdir -p $c_parents 2>/dev/null && echo "+memory +pids" > $c_parents/cgroup.subtree_control 2>/dev/null &&
      echo $c_most > $c_parents/memory.max 2>/dev/null ||
      { echo "vtb: this sandbox has no cgroup here (cgroup v2 at /sys/fs/cgroup cannot be written)" >&2; return 0; }
  else   # cgroup v1: its memory and pids hierarchies, each where it is mounted
    for c in memory pids; do
      own=$(awk -F: -v c=$c '$2 == c {print $3}' /proc/self/cgroup)
      [ -n "$own" ] && [ -e "/sys/fs/cgroup/$c/cgroup.procs" ] && mkdir -p "/sys/fs/cgroup/$c${own%/}/vtb-confine" \
        2>/dev/null || { echo "vtb: this sandbox has no cgroup here (no writable cgroup v1 $c hierarchy)" >&2; return 0; }
      c_parents="$c_parents /sys/fs/cgroup/$c${own%/}/vtb-confine"
    done
    for d in $c_parents; do [ ! -e "$d/memory.limit_in_bytes" ] || echo $c_most > "$d/memory.limit_in_bytes"; done
  fi
  stale_confine_cgroups_removed $c_parents >/dev/null
  for d in $c_parents; do
    if ! mkdir -p "$d/$c_me" 2>/dev/null; then
      for m in $c_made; do rmdir "$m"; done
      echo "vtb: this sandbox has no cgroup here ($d/$c_me cannot be made)" >&2
      return 0
    fi
    c_made="$c_made $d/$c_me"
    [ ! -e "$d/$c_me/pids.max" ] || echo "${VTB_CONFINE_TASKS:-1024}" > "$d/$c_me/pids.max"
    for f in memory.max memory.limit_in_bytes; do   # a test's own ceiling
      [ -z "${VTB_CONFINE_MEMORY_MIB:-}" ] || [ ! -e "$d/$c_me/$f" ] || echo $(( VTB_CONFINE_MEMORY_MIB << 20 )) > "$d/$c_me/$f"
    done
  done
  echo $c_made
}

# `stale_confine_cgroups_removed [PARENT...]`: the sandboxes' cgroups in these parents whose shell
# is gone, removed (each is empty once its sandbox died with its shell), and each line printed.
# With no parent named, every such cgroup on the host, and the parents left empty (gc).
stale_confine_cgroups_removed() {
  { if [ $# -gt 0 ]; then for p; do ls -d "$p"/*-* 2>/dev/null; done
    else find /sys/fs/cgroup -maxdepth 9 -path '*/vtb-confine/*-*' -type d 2>/dev/null; fi; } |
  while read -r d; do
    c_pid=${d##*/}
    [ -d "$d" ] && [ "$(cut -d' ' -f22 "/proc/${c_pid%%-*}/stat" 2>/dev/null)" != "${c_pid#*-}" ] &&
      rmdir "$d" 2>/dev/null && echo "cgroup $d"
  done
  [ $# -gt 0 ] || find /sys/fs/cgroup -maxdepth 8 -name vtb-confine -type d 2>/dev/null | while read -r d; do
    ! rmdir "$d" 2>/dev/null || echo "cgroup $d"
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
