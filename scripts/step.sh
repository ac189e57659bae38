#!/usr/bin/env bash
# scripts/step.sh NAME COMMAND...: one set-up step, each line it prints prefixed with its name (make
# runs the independent steps side by side, so their lines interleave), then how long it took.
set -uo pipefail
name=$1
shift
t0=$SECONDS
"$@" 2>&1 | sed -u "s/^/[$name] /"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
  echo "[$name] done in $((SECONDS - t0)) s"
else
  echo "[$name] failed (exit $rc) after $((SECONDS - t0)) s"
fi
exit "$rc"
