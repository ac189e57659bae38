#!/usr/bin/env bash
# The tests of the tiers named (docs/testing.md), one tier after the other: `core` (every unit test
# and the core live tests: `make test`), `extended` (the rest of the live tests: `make test-all`
# runs both). In each tier, two lanes at once (tests/conftest.py says which and why), then its tests
# marked `alone`, one at a time. Every phase runs; any failing fails the whole (5: nothing selected
# there). Each phase's JUnit report goes to $TEST_TIMES/<tier>-<phase>.xml: docs/testing.md's times
# come from them (`make test-times`). PYTEST_ARGS go to pytest.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/tests.sh core|extended ..." >&2; exit 2; }
cd "$(dirname "$0")/.."
pytest=.venv/bin/pytest
times=${TEST_TIMES:-/var/tmp/vtb-test-times}
mkdir -p "$times"
eval "extra=(${PYTEST_ARGS:-})"   # split as the shell splits a command line: -k 'a or b' stays one
stop=""
trap 'stop=1' INT TERM   # pytest stops too; then what the lanes handed over is removed, and nothing else runs
removed_handed_over() {
  .venv/bin/harness host nested down --config tests/nested.toml >/dev/null 2>&1
  [ ! -d /var/tmp/vtb-ci/ci ] || .venv/bin/harness testbed down --config tests/ci.toml >/dev/null 2>&1
}
status=0
for tier in "$@"; do
  case $tier in
    core) only="not extended"; fleet=hand ;;   # only the core tier's alone phase has tests on the ci fleet
    extended) only="extended"; fleet="" ;;
    *) echo "scripts/tests.sh: tier '$tier' is not one of core, extended" >&2; exit 2 ;;
  esac
  # The lanes hand the ci fleet (core) and their last two nested hosts (extended) over to the alone
  # phase, which removes them (tests/conftest.py).
  VTB_TEST_HAND_OVER=hand-over VTB_TEST_FLEET_HAND_OVER=${fleet:+hand-over} \
    $pytest -n 2 --dist loadgroup -m "not alone and $only" --junitxml="$times/$tier-lanes.xml" "${extra[@]}"; lanes=$?
  [ -z "$stop" ] || { removed_handed_over; exit 130; }
  VTB_TEST_HAND_OVER=take-over VTB_TEST_FLEET_HAND_OVER=${fleet:+take-over} \
    $pytest -m "alone and $only" --junitxml="$times/$tier-alone.xml" "${extra[@]}"; alone=$?
  [ -z "$stop" ] || { removed_handed_over; exit 130; }
  for rc in $lanes $alone; do
    [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=$rc
  done
done
exit "$status"
