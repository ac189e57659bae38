# ioping runner (after find-disk.sh), the same in a guest and on the host: ioping with the
# arguments in IOPING_ARGS on the data disk. Argument: LOCATOR. Prints ioping's version, its JSON
# report unchanged, then its CPU time (report_cpu). A run during which the kernel timed out or
# failed I/O is reported (exit 4) rather than passed off as a measurement.
command -v ioping >/dev/null || { echo "run-ioping: ioping is not installed here (Debian: ioping)" >&2; exit 6; }
ioping -v
before=$(dmesg | wc -l)
# IOPING_ARGS is the harness's own list of options and numbers: split on spaces, never evaluated
# shellcheck disable=SC2086
confined "$dev" "" ioping $IOPING_ARGS "$dev" || exit $?
report_cpu
bad=$(dmesg | awk -v n="$before" 'NR > n && tolower($0) ~ /timeout|i\/o error|abort|reset/ { print; if (++k == 3) exit }')
[ -z "$bad" ] || { echo "run-ioping: the kernel reported I/O trouble during the run: $bad" >&2; exit 4; }
