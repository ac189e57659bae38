#!/usr/bin/env bash
# The live tests of one tier (docs/testing.md): `core` is `make test`, `all` is `make test-all`.
# Two lanes at once (tests/conftest.py says which and why), then the tests marked `alone`, one at a
# time; both phases always run, and either failing fails the tier (5: nothing selected there).
# Each phase's JUnit report goes to $TEST_TIMES (docs/testing.md's times come from them:
# `make test-times`). Extra arguments go to pytest.
set -uo pipefail
tier=${1:?usage: scripts/tests.sh core|all [pytest args]}; shift
cd "$(dirname "$0")/.."
pytest=.venv/bin/pytest
times=${TEST_TIMES:-/var/tmp/vtb-test-times}
case $tier in
  core) only=" and not extended" ;;
  all)  only="" ;;
  *) echo "scripts/tests.sh: tier '$tier' is not one of core, all" >&2; exit 2 ;;
esac
mkdir -p "$times"
# The lanes hand the ci fleet and their last two nested hosts over to the alone phase, which removes them
# (tests/conftest.py).
VTB_TEST_HAND_OVER=hand-over $pytest -n 2 --dist loadgroup -m "not alone$only" \
  --junitxml="$times/$tier-lanes.xml" "$@"; lanes=$?
VTB_TEST_HAND_OVER=take-over $pytest -m "alone$only" --junitxml="$times/$tier-alone.xml" "$@"; alone=$?
for rc in $lanes $alone; do [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || exit "$rc"; done
