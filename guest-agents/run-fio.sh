#!/bin/sh
# In-guest runner: finds the data disk, then runs the fio job read from stdin and prints fio's
# JSON output unchanged. Usage: run-fio.sh LOCATOR, with FIO_* variables in the environment.
# LOCATOR is serial:<serial> (virtio-blk, virtio-scsi, NVMe) or pci:<address> (devices with no
# serial of ours, such as vhost-user-blk or a passed-through controller).
locator=$1
want=${locator#*:}
dev=
for b in /sys/block/*; do
  case $locator in
    serial:*)
      # virtio-blk: serial; NVMe: device/serial (space-padded); SCSI: VPD page 0x80 after a 4-byte header
      for s in "$(cat "$b/serial" 2>/dev/null)" "$(cat "$b/device/serial" 2>/dev/null)" \
               "$(tail -c +5 "$b/device/vpd_pg80" 2>/dev/null)"; do
        [ "$(printf %s "$s" | tr -d ' \000')" = "$want" ] && dev=/dev/${b##*/}
      done ;;
    pci:*)
      case $(readlink -f "$b") in */"$want"/*) dev=/dev/${b##*/} ;; esac ;;
  esac
done
[ -n "$dev" ] || { echo "run-fio: no disk matching '$locator' in this guest" >&2; exit 3; }
# A run during which the guest kernel timed out or failed I/O gives numbers nobody should trust:
# report it (exit 4) rather than let them pass as a measurement.
before=$(dmesg | wc -l)
FIO_FILENAME=$dev fio --output-format=json - || exit $?
bad=$(dmesg | tail -n +$((before + 1)) | grep -iE 'timeout|I/O error|abort|reset' | head -3)
[ -z "$bad" ] || { echo "run-fio: the guest kernel reported I/O trouble during the run: $bad" >&2; exit 4; }
