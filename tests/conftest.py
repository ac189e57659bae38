import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TAIL_LINES = 40
# `make test` runs two lanes at once, one pytest-xdist worker each (--dist loadgroup): while one
# integration test runs, this 2-core machine was measured half idle (48-52% busy: a TCG guest waits
# on the shared disk; a nested host's L2 keeps one of its two vCPUs busy). A lane runs its tests in
# file order and owns its state: the nested hosts and Ceph's clusters in one, the ci fleet and its
# sweeps in the other; the lanes share only the machine. The unit tests keep no state: each runs on
# whichever worker is free first, so they fill the end of the lane that ends first.
# In `make test-all` the nested lane ends with ceph-scaling over two ssh hosts, whose two L1s under
# TCG want both cores: it runs beside the other lane's last tests, a third slower than alone, within
# its bounds. What acts on the whole machine (gc, a stopped libvirtd) is marked `alone` and runs
# after both lanes, by itself.
# The network backends' sweeps and the CI example (fleets of their own names) join the nested lane,
# which balances the lanes of `make test`.
NESTED_LANE = {"test_nested_raid.py", "test_ceph.py", "test_network_backends_live.py", "test_ci_example.py"}
# What the alone phase would bring up again takes minutes: scripts/tests.sh sets these so that the
# lanes leave it up ("hand-over": the two nested hosts of their last test; the ci fleet, paused, in
# the core tier) for the alone phase ("take-over"), which removes them when it ends, whatever it ran.
HAND_OVER = os.environ.get("VTB_TEST_HAND_OVER", "")
FLEET_HAND_OVER = os.environ.get("VTB_TEST_FLEET_HAND_OVER", "")
TESTS = Path(__file__).parent


# A live test's tier (docs/testing.md): `core` runs in `make test` (the README's test command, which
# CI runs), `extended(why=...)` only in `make test-all`. Every live test says which, and what it runs
# for real with `covers(...)` (tests/unit/test_tiers.py: every plug-in has a live test).
TIERS = ("core", "extended")
# Set to a path, collection writes each live test's id, tier, lane, covers and why there as JSON
# (tests/unit/test_tiers.py, scripts/test_times.py).
TIERS_OUT = os.environ.get("VTB_TEST_TIERS_OUT", "")


def tier_of(item) -> str | None:
    """The item's one tier, or None when it has none or both."""
    marked = [t for t in TIERS if item.get_closest_marker(t)]
    return marked[0] if len(marked) == 1 else None


def lane_of(item) -> str:
    return "nested" if item.path.name in NESTED_LANE else "local"


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(items):
    untiered = [i.nodeid for i in items if i.get_closest_marker("integration") and tier_of(i) is None]
    if untiered:
        raise pytest.UsageError(f"{', '.join(untiered)}: mark each live test with exactly one tier, "
                                "@pytest.mark.core (make test) or @pytest.mark.extended (make test-all only)")
    for item in items:   # the unit tests keep no state: in no lane, each goes to whichever worker is free first
        if item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.xdist_group(lane_of(item)))
    items.sort(key=lambda item: item.get_closest_marker("takes_handed_over_hosts") is None)   # stable: first


def covered(item) -> dict[str, list[str]]:
    """{kind: names} of the item's `covers` markers, its module's and its own together."""
    found: dict[str, set] = {}
    for m in item.iter_markers("covers"):
        for kind, names in m.kwargs.items():
            found.setdefault(kind, set()).update([names] if isinstance(names, str) else names)
    return {kind: sorted(names) for kind, names in found.items()}


def pytest_collection_finish(session):
    if TIERS_OUT and not hasattr(session.config, "workerinput"):
        live = [{"id": i.nodeid, "tier": tier_of(i), "lane": lane_of(i), "alone": bool(i.get_closest_marker("alone")),
                 "covers": covered(i), "why": i.get_closest_marker(tier_of(i)).kwargs.get("why", "")}
                for i in session.items if i.get_closest_marker("integration")]
        Path(TIERS_OUT).write_text(json.dumps(live, indent=1))


def pytest_sessionfinish(session):
    """The alone phase removes what the lanes handed over, even when the test that takes it was
    not selected."""
    if hasattr(session.config, "workerinput") or session.config.option.collectonly:
        return
    harness = str(Path(sys.executable).parent / "harness")
    if HAND_OVER == "take-over":
        subprocess.run([harness, "host", "nested", "down", "--config", str(TESTS / "nested.toml")],
                       capture_output=True, timeout=600)
    if FLEET_HAND_OVER == "take-over":
        subprocess.run([harness, "testbed", "down", "--config", str(TESTS / "ci.toml")], capture_output=True, timeout=600)


@pytest.fixture
def fixture_text():
    return lambda rel: (FIXTURES / rel).read_text()


def _consoles_since(t0: float) -> list[Path]:
    """Console logs written while the test ran: the nested host's own, and those kept in run folders."""
    from harness.engine import settings
    found = []
    for toml in ("ci.toml", "nested.toml"):
        cfg = settings.load(Path(__file__).parent / toml)
        found += [p for p in (cfg.state_dir / "nested" / "console.log", *cfg.results_dir.glob("*/consoles/*.log"))
                  if p.exists() and p.stat().st_mtime >= t0]
    return sorted(set(found))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed integration test shows the tails of the guests' and the nested host's consoles."""
    if call.when == "setup":
        item.stash[START] = time.time()
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.session.stash.setdefault(FAILED_IN, set()).add(item.path.name)
    if report.failed and item.get_closest_marker("integration") and START in item.stash:
        for log in _consoles_since(item.stash[START] - 1):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-TAIL_LINES:])
            report.sections.append((f"console {log}", tail or "(empty)"))


START = pytest.StashKey[float]()
FAILED_IN = pytest.StashKey[set]()   # the files with a test that failed since a fixture last asked


@pytest.fixture
def a_test_of_this_file_failed(request) -> bool:
    """Whether a test of this file failed since the last time this answered yes: a file whose tests
    share a long-lived resource (the nested host) replaces it after a failure."""
    failed = request.session.stash.setdefault(FAILED_IN, set())
    if request.path.name in failed:
        failed.discard(request.path.name)
        return True
    return False
