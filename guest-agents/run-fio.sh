# In-guest runner (after find-disk.sh): runs the fio job read from stdin on the data disk and
# prints fio's JSON output (json+: with the latency histograms) unchanged. Argument: LOCATOR; FIO_*
# variables in the environment.
# A run during which the guest kernel timed out or failed I/O gives numbers nobody should trust:
# it is reported (exit 4) rather than passed off as a measurement.
# With FIO_MKFS set (e.g. "mkfs.xfs -f -q"), the job runs on a file in a new filesystem on the disk,
# which is unmounted and wiped afterwards (the next user of the disk must not find our signature).
# What the runner made goes when it ends, stopped too (dash runs the EXIT trap only on exit).
cleanup=:
trap 'eval "$cleanup"' EXIT
trap 'exit 143' TERM INT
if [ -n "${FIO_MKFS:-}" ]; then
  disk=$dev
  mnt=$(mktemp -d /tmp/vtb-fs-XXXXXX)
  out=$($FIO_MKFS "$disk" 2>&1) || { echo "run-fio: $FIO_MKFS $disk failed: $(echo "$out" | head -n 2)" >&2; rmdir "$mnt"; exit 5; }
  cleanup='umount "$mnt"; rmdir "$mnt"; wiped "$disk"'
  mount ${FIO_MOUNT_OPTIONS:+-o "$FIO_MOUNT_OPTIONS"} "$disk" "$mnt" || exit 5
  dev=$mnt/vtb-fio.dat
  export FIO_OFFSET=0
fi
job=$(cat)
if [ -n "${rbd_image:-}" ]; then   # the job's own section gets librbd: the engine, the pool and the image
  job=$(printf '%s\nioengine=rbd\nclientname=%s\npool=%s\nrbdname=%s\n' "$job" "${FIO_RBD_ID:-admin}" \
    "${rbd_image%%/*}" "${rbd_image#*/}")
fi
if [ -n "${FIO_START_AT:-}" ]; then  # a start shared with the point's other participants (this node's clock)
  # Each job waits for it in fio's own prerun, which comes after the job's set-up (its engine, its
  # buffers, its files opened): a slow node sets up while it waits, rather than starting late.
  # Bounded: a wrong clock offset must cost overlap (which the harness checks), never a hung point.
  # fio reads `;` and `#` as a comment and expands ${VAR} itself, so the command has neither of the
  # first. awk by its real path: the host's sandbox has no /etc/alternatives to resolve the name.
  awk=$(readlink -f "$(command -v awk)")
  export FIO_START_MAX_WAIT="${FIO_START_MAX_WAIT:-10}"
  wait='exec_prerun=sh -c '"'"'sleep $('"$awk"' -v t=${FIO_START_AT} -v m=${FIO_START_MAX_WAIT} -v n=$(date +%s.%N) "BEGIN { printf \"%.3f\", (t - n < 0) ? 0 : ((t - n > m) ? m : t - n) }")'"'"
  job=$(printf '%s\n' "$job" | VTB_WAIT=$wait awk '{ print } /^\[/ && $0 != "[global]" { print ENVIRON["VTB_WAIT"] }')
fi
fname=$dev
# librbd takes the image from rbdname; a filename with the pool in it would make fio create a
# directory named for the pool in its working directory
[ -z "${rbd_image:-}" ] || fname=${rbd_image#*/}
before=$(dmesg | wc -l)
# fio writes files into its working directory (a verify state, `local-<job>-<n>-verify.state`, and
# follows a symlink of that name): a private, empty one of its own, removed afterwards.
work=$(mktemp -d /tmp/vtb-fio-XXXXXX) || exit 5
cleanup="rm -rf -- \"\$work\"; $cleanup"
# On a host, fio runs confined (confine.sh) to its target: the disk, the new filesystem's mount
# (FIO_MKFS), nothing for an rbd image (librbd reaches it over the network); and writes only in
# this run's own scratch folder (the trace's or the captured iologs').
target=$dev
[ -z "${FIO_MKFS:-}" ] || target=$mnt
[ -z "${rbd_image:-}" ] || target=
scratch=${FIO_TRACE:-${FIO_IOLOG:-}}
export FIO_FILENAME="$fname"
rc=0
(cd "$work" && printf '%s\n' "$job" | confined "$target" "${scratch%/*}" fio --output-format=json+ - \
  > "$work/stdout" 2> "$work/stderr") || rc=$?
# fio's report unchanged, without the line fio prints before it for each prerun (the shared start's)
awk '/^\{/ { report = 1 } report || !/^[^ ]+ : Saving output of prerun in [^ ]+\.prerun\.txt$/' "$work/stdout"
cat "$work/stderr" >&2
# A job process that dies of a signal leaves fio's exit status 0 and its job's error 0: its figures
# are only what it did before, never a measurement.
died=$(grep -m 1 'got signal=' "$work/stderr")
[ "$rc" -eq 0 ] || exit "$rc"
[ -z "$died" ] || { echo "run-fio: a fio job process died ($died): the point has no measurement" >&2; exit 7; }
bad=$(dmesg | awk -v n="$before" 'NR > n && tolower($0) ~ /timeout|i\/o error|abort|reset/ { print; if (++k == 3) exit }')
[ -z "$bad" ] || { echo "run-fio: the guest kernel reported I/O trouble during the run: $bad" >&2; exit 4; }
