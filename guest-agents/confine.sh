# Sourced (prepended) by the runners: `confined TARGET RW_DIR CMD...` runs CMD. On a host
# (VTB_CONFINE=1) CMD runs in a bubblewrap sandbox that holds even when the job-file gate is
# fooled. It sees, read-only, only what a tool needs to start: /usr (and the /bin, /lib links or
# folders), the loader's and the user database's files of /etc, /sys; a private, empty /tmp (its
# working directory, where fio keeps a verify state); a /dev with only the basic nodes and TARGET;
# TARGET (a device, or a file or folder) and RW_DIR (this run's own scratch folder, or empty)
# writable; everything else read-only and empty. No network unless it reaches Ceph (an rbd image,
# with its conf); its own PID, IPC and UTS namespaces; no capabilities, no new privileges, no
# real-time and no raised priority. In a guest (nothing there but the disks under test) CMD runs
# as is. docs/what-vtb-touches.md says why.
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
  prlimit --rtprio=0 --nice=0 -- bwrap --unshare-ipc --unshare-pid --unshare-uts --unshare-cgroup-try \
    --die-with-parent --new-session --cap-drop ALL --ro-bind /usr /usr --ro-bind /sys /sys --proc /proc \
    --dev /dev --tmpfs /tmp "$@"
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
