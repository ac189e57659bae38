#!/bin/sh
# In-guest runner: finds the data disk by its serial, then runs the fio job read from stdin
# and prints fio's JSON output unchanged. Usage: run-fio.sh SERIAL (FIO_* variables in the env).
serial=$1
dev=
for b in /sys/block/*; do
  if [ "$(cat "$b/serial" 2>/dev/null)" = "$serial" ] || [ "$(cat "$b/device/serial" 2>/dev/null)" = "$serial" ]; then
    dev=/dev/${b##*/}
  fi
done
[ -n "$dev" ] || { echo "run-fio: no disk with serial '$serial' in this guest" >&2; exit 3; }
FIO_FILENAME=$dev exec fio --output-format=json -
