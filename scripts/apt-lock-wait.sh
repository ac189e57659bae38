#!/usr/bin/env bash
# Waits, with a bound, until no other apt or dpkg holds its locks (a fresh cloud machine often
# runs unattended-upgrades at boot), saying what it waits for. Exit 1 when the bound expires.
# Usage: apt-lock-wait.sh [seconds]   (default $VTB_APT_LOCK_WAIT_S or 600)
set -euo pipefail
bound=${1:-${VTB_APT_LOCK_WAIT_S:-600}}
locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)

held() { # prints the first lock another process holds (dpkg and apt use fcntl locks)
  python3 - "${locks[@]}" <<'PY'
import fcntl, os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        continue
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_UN)
    except OSError:
        print(path)
        break
    finally:
        os.close(fd)
PY
}

start=$SECONDS
said=
while lock=$(held) && [ -n "$lock" ]; do
  if [ $((SECONDS - start)) -ge "$bound" ]; then
    echo "error: $lock is still held by another apt or dpkg after ${bound} s; wait for it to finish" \
         "(e.g. unattended-upgrades) and run the command again" >&2
    exit 1
  fi
  [ -n "$said" ] || { echo "waiting for another apt/dpkg to release $lock (up to ${bound} s)..."; said=1; }
  sleep 2
done
[ -z "$said" ] || echo "apt/dpkg locks free after $((SECONDS - start)) s"
