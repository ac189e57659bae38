# In-guest runner (after find-disk.sh): runs the fio job read from stdin on the data disk and
# prints fio's JSON output unchanged. Argument: LOCATOR; FIO_* variables in the environment.
# A run during which the guest kernel timed out or failed I/O gives numbers nobody should trust:
# it is reported (exit 4) rather than passed off as a measurement.
before=$(dmesg | wc -l)
FIO_FILENAME=$dev fio --output-format=json - || exit $?
bad=$(dmesg | tail -n +$((before + 1)) | grep -iE 'timeout|I/O error|abort|reset' | head -3)
[ -z "$bad" ] || { echo "run-fio: the guest kernel reported I/O trouble during the run: $bad" >&2; exit 4; }
