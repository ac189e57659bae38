"""A new plug-in cannot arrive untested: every backend, workload and host kind vtb lists has a live
test in `make test` (the core tier), every experiment one in either tier, and docs/testing.md lists
every live test with its tier (tests/conftest.py reads the tiers; docs/testing.md says why)."""
from __future__ import annotations

import importlib.util
import pkgutil
import re
from importlib import import_module
from pathlib import Path

import pytest

from harness import backends, experiments, hosts, workloads

ROOT = Path(__file__).parents[2]


def listed() -> dict[str, set[str]]:
    """What vtb lists, by the kind a `covers` marker names: a workload is a module of
    harness/workloads with a tool (TOOL) or a runner of its own in guest-agents/ (RUNNER)."""
    tools = {m.name for m in pkgutil.iter_modules(workloads.__path__)
             if any(hasattr(import_module(f"harness.workloads.{m.name}"), a) for a in ("TOOL", "RUNNER"))}
    return {"backends": set(backends.all_backends()), "workloads": tools, "hosts": set(hosts.kinds()),
            "experiments": set(experiments.registry())}


def times_script():
    """scripts/test_times.py, which collects the live tests and renders docs/testing.md's times."""
    spec = importlib.util.spec_from_file_location("test_times", ROOT / "scripts" / "test_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def live() -> list[dict]:
    """Every live test, as pytest collects it: id, tier, lane, covers, why."""
    return times_script().live_tests()


def covering(live: list[dict], kind: str, tiers: tuple[str, ...]) -> set[str]:
    return {name for t in live if t["tier"] in tiers for name in t["covers"].get(kind, ())}


@pytest.mark.parametrize("kind", ["backends", "workloads", "hosts"])
def test_every_backend_workload_and_host_kind_has_a_live_test_in_make_test(live, kind):
    missing = listed()[kind] - covering(live, kind, ("core",))
    assert not missing, f"{kind} {sorted(missing)}: no live test in make test covers them; add one marked " \
                        f"@pytest.mark.core and @pytest.mark.covers({kind}=...)"


def test_every_experiment_has_a_live_test_in_a_tier(live):
    missing = listed()["experiments"] - covering(live, "experiments", ("core", "extended"))
    assert not missing, f"experiments {sorted(missing)}: no live test covers them"


def test_covers_names_only_what_vtb_lists(live):
    known = listed()
    wrong = {(t["id"], kind, name) for t in live for kind, names in t["covers"].items() for name in names
             if name not in known.get(kind, ())}
    assert not wrong, wrong


def test_each_extended_test_says_why_it_is_not_in_make_test(live):
    assert not [t["id"] for t in live if t["tier"] == "extended" and not t["why"]]


def test_docs_testing_lists_every_live_test_in_its_tier(live):
    """docs/testing.md's generated table (`make test-times`) has a row per live test, in its tier."""
    page = (ROOT / "docs" / "testing.md").read_text()
    table = page.split("<!-- begin: test-times")[1].split("<!-- end: test-times")[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (core|extended) \|", table, re.MULTILINE))
    assert rows == {t["id"].removeprefix("tests/integration/"): t["tier"] for t in live}, \
        "docs/testing.md is out of date: run `make test-times`"


def test_times_are_read_from_junit_by_the_tests_pytest_id(monkeypatch):
    """scripts/test_times.py on a JUnit report of `make test`'s lanes (recorded, trimmed): each
    case under its pytest id (without pytest-xdist's `@lane`), the phase's wall time, the unit tests
    as one row, and a live test the report lacks said to be not measured."""
    times = times_script()
    monkeypatch.setattr(times, "TIMES", ROOT / "tests" / "fixtures" / "junit")
    found = times.reports()
    assert list(found) == [("core", "lanes")]
    assert "| core | lanes | 2026-12-06 02:36 | 916 | 1 | 29.6 min |" in times.phase_rows(found)
    live = [{"id": "tests/integration/test_backend_sweeps.py::test_backends_against_the_host", "tier": "core",
             "lane": "local", "alone": False, "covers": {}, "why": ""},
            {"id": "tests/integration/test_network_backends_live.py::test_a_network_backend_against_the_host"
                   "[iscsi-tgt_cpu_s-tgtd]", "tier": "core", "lane": "nested", "alone": False, "covers": {}, "why": ""},
            {"id": "tests/integration/test_ceph.py::test_ceph_scaling_two_nodes_against_three", "tier": "extended",
             "lane": "nested", "alone": False, "covers": {}, "why": "two clusters"}]
    rows = times.test_rows(found, live)
    assert rows[2] == "| the unit tests (1) | core | either | 0 | |"
    assert rows[3] == "| `test_backend_sweeps.py::test_backends_against_the_host` | core | local | 329 |  |"
    assert rows[4].endswith("[iscsi-tgt_cpu_s-tgtd]` | core | nested | 45 |  |")
    assert rows[5].endswith("against_three` | extended | nested | not measured | two clusters |")
