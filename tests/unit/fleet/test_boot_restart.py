"""A guest that hangs while booting (seen with KVM guests in a nested host under TCG) is restarted
once, its first console kept, and the restart recorded; one that hangs again fails the bring-up."""
from __future__ import annotations

import pytest

from harness.engine import settings
from harness.fleet import testbed
from harness.hosts import LocalHost
from harness.libvirt.agent import AgentTimeout


class FakeDomain:
    def __init__(self, name: str):
        self.name, self.starts = name, 1

    def destroy(self):
        pass

    def create(self):
        self.starts += 1


class FakeConn:
    def __init__(self, domains):
        self.domains = domains

    def lookupByName(self, name):
        return self.domains[name]

    def close(self):
        pass


def _bed(tmp_path, monkeypatch, hangs: dict[str, int]):
    """A testbed whose guests' agents stay silent for their first `hangs[name]` boots."""
    domains = {n: FakeDomain(n) for n in ("vm0", "vm1")}

    class FakeAgent:
        def __init__(self, dom):
            self.dom = dom

        def wait_ready(self, timeout):
            if self.dom.starts <= hangs.get(self.dom.name, 0):
                raise AgentTimeout(f"{self.dom.name}: guest agent did not answer within {timeout:.0f} s")
            return 1.0

    monkeypatch.setattr(testbed, "connect", lambda uri: FakeConn(domains))
    monkeypatch.setattr(testbed, "GuestAgent", FakeAgent)
    monkeypatch.setattr(testbed, "restart", lambda dom: (dom.destroy(), dom.create()))
    monkeypatch.setattr(testbed.guest_consoles, "text", lambda host, dom: f"{dom.name} console: x86/fpu\n")
    cfg = settings.load(None, [f"state_dir={tmp_path / 'state'}"])
    return testbed.Testbed(cfg, host=LocalHost()), domains


def test_a_guest_hung_in_boot_is_restarted_once_and_recorded(tmp_path, monkeypatch):
    bed, domains = _bed(tmp_path, monkeypatch, {"vm0": 1})
    ready, restarts = bed._wait_agents(["vm0", "vm1"], 0.0)
    assert set(ready) == {"vm0", "vm1"}
    assert domains["vm0"].starts == 2 and domains["vm1"].starts == 1
    assert list(restarts) == ["vm0"] and "did not answer within 180 s; restarted" in restarts["vm0"]
    kept = list((tmp_path / "state" / "logs").glob("vm0-boot-hang-*.log"))
    assert len(kept) == 1 and "x86/fpu" in kept[0].read_text()


def test_a_guest_that_hangs_again_fails_the_bring_up(tmp_path, monkeypatch):
    bed, _ = _bed(tmp_path, monkeypatch, {"vm1": 2})
    with pytest.raises(AgentTimeout, match="vm1"):
        bed._wait_agents(["vm0", "vm1"], 0.0)


class HungNestedTestbed:
    def host_not_answering(self):
        return "libvirtd at qemu+tcp://127.0.0.1:1/system did not answer within 30 s"


def test_a_nested_host_that_stopped_answering_is_rebuilt_and_the_sweep_goes_on(monkeypatch):
    from types import SimpleNamespace

    from harness.measure import sweep

    class Nested:
        rebuildable = True

        def __init__(self, uri):
            self.uri = uri

        def descriptor(self):
            return {"kind": "nested", "state_dir": "/x/nested"}

    fresh = Nested("qemu+tcp://127.0.0.1:2/system")
    monkeypatch.setattr(sweep.nested_l1, "rebuild", lambda place: fresh)
    ctx = SimpleNamespace(host=Nested("qemu+tcp://127.0.0.1:1/system"), cfg=SimpleNamespace(nested_place="place"))
    pipeline = SimpleNamespace(sites=[])
    assert sweep.rebuilt_lost_host(ctx, pipeline, HungNestedTestbed())
    assert ctx.host is fresh and [s.uri for s in pipeline.sites] == [fresh.uri]


def test_a_lost_host_other_than_a_nested_one_is_not_rebuilt():
    from types import SimpleNamespace

    from harness.measure import sweep
    ctx = SimpleNamespace(host=LocalHost(), cfg=SimpleNamespace(nested_place="place"))
    assert not sweep.rebuilt_lost_host(ctx, SimpleNamespace(sites=[]), HungNestedTestbed())


def test_a_fleet_rebuilt_after_its_nested_host_was_removed_gets_a_new_host_on_the_same_port(tmp_path, monkeypatch):
    """A guest lost mid-run because its L1 died: the teardown removes the L1 (its record goes), so the
    rebuild boots a new one first, on the port the run's host object knows, then the fleet."""
    from types import SimpleNamespace

    from harness.fleet import testbed
    from harness.hosts.nested import RECORD
    calls = []

    class Nested:
        rebuildable = True
        state_dir = tmp_path / "nested"
        record = SimpleNamespace(ssh_port=40222)

        def descriptor(self):
            return {"kind": "nested", "state_dir": str(self.state_dir)}

    bed = testbed.Testbed.__new__(testbed.Testbed)
    bed.cfg, bed.host = SimpleNamespace(nested_place="place"), Nested()
    monkeypatch.setattr(bed, "down", lambda quiet=False: calls.append("down"))
    monkeypatch.setattr(bed, "up", lambda: calls.append("up") or "record")
    monkeypatch.setattr(testbed.nested_l1, "up", lambda place, port=None: calls.append(("host up", place, port)))
    assert bed.rebuilt() == "record" and calls == ["down", ("host up", "place", 40222), "up"]
    Nested.state_dir.mkdir()
    (Nested.state_dir / RECORD).write_text("{}")   # still there: kept, only the fleet is rebuilt
    calls.clear()
    assert bed.rebuilt() == "record" and calls == ["down", "up"]
