"""hoststat on this machine's /proc: the settle wait ends with the point's starting snapshot, in
the same process, in-process here and through python3 as on a remote host."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest

from harness.hosts import LocalHost
from harness.measure import hoststat


@dataclass
class ThroughPython3:
    """This machine reached as a remote host is: the same python3 -c path, not in-process."""
    is_this_machine = False
    name: str = "elsewhere"

    def run(self, argv, **kw):
        return LocalHost().run(argv, **kw)


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "37.5"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("host", [LocalHost(), ThroughPython3()], ids=["in-process", "python3"])
def test_the_settle_wait_ends_with_a_snapshot_of_the_points_processes(host, sleeper):
    # busy + iowait never exceeds 100%, so a bound over it is met however loaded CI is
    got = hoststat.wait_quiet_on(host, 0.5, 101.0, 1e6, 0.1, [], [("tool", "sleep 37.5")])
    assert not got["timed_out"] and got["wait_s"] >= 0.1
    snap = got["snapshot"]
    assert {p["label"] for p in snap["procs"].values()} == {"tool"}
    assert str(sleeper.pid) in snap["procs"] and sum(snap["cpu"].values()) > 0
    later = hoststat.snapshot_on(host, [("tool", "sleep 37.5")])
    assert hoststat.load_between(snap, later)["seconds"] > 0   # a start and an end on one clock
