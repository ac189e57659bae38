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
eval "extra=(${PYTEST_ARGS:-})"   # as the shell would split them (make passed them so before)
status=0
for tier in "$@"; do
  case $tier in
    core) only="not extended" ;;
    extended) only="extended" ;;
    *) echo "scripts/tests.sh: tier '$tier' is not one of core, extended" >&2; exit 2 ;;
  esac
  # The lanes hand the ci fleet and their last two nested hosts over to the alone phase, which
  # removes them (tests/conftest.py).
  VTB_TEST_HAND_OVER=hand-over $pytest -n 2 --dist loadgroup -m "not alone and $only" \
    --junitxml="$times/$tier-lanes.xml" "${extra[@]}"; lanes=$?
  VTB_TEST_HAND_OVER=take-over $pytest -m "alone and $only" --junitxml="$times/$tier-alone.xml" "${extra[@]}"; alone=$?
  for rc in $lanes $alone; do
    [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=$rc
  done
done
exit "$status"
