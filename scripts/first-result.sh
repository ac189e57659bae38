#!/usr/bin/env bash
# The README's main job as a new user types it, `make testbed up && harness run vm-scaling`, each line
# it prints prefixed with the seconds since its first command. The log ($VTB_FIRST_RESULT_LOG,
# default /var/tmp/vtb-first-result.log) is what `harness bench` reads for the fresh machine's way
# to its first result, step by step (docs/benchmarks.md); run it on a fresh machine.
set -uo pipefail
log=${VTB_FIRST_RESULT_LOG:-/var/tmp/vtb-first-result.log}
cd "$(dirname "$0")/.."
{
  make testbed up && echo "vtb-first-result: testbed up done" && harness run vm-scaling
  echo "vtb-first-result: done (exit $?)"
} 2>&1 | python3 -u -c '
import sys, time
t0 = time.monotonic()
for line in sys.stdin:
    print(f"{time.monotonic() - t0:.1f} {line}", end="", flush=True)
' | tee "$log.tmp"
mv "$log.tmp" "$log"
grep -q "vtb-first-result: done (exit 0)" "$log"
