"""noisy-neighbour without a testbed: its points and plan from the config, the neighbours' run
around the victim's, the data disk libvirt can limit, and the rows its summary prints."""
import threading
import time
from pathlib import Path

import pytest

from harness.common.schema import ConfigError
from harness.engine import settings
from harness.experiments import noisy_neighbour as nn
from harness.libvirt import iotune
from harness.results.outputs import Output
from harness.results.samples import Sample


def test_each_count_on_the_host_in_the_vms_and_capped():
    plan = nn.EXPERIMENT.plan(settings.load(None, []))
    assert [(p.label, p.env) for p in plan.blocks[0].points] == [
        ("n0", "physical"), ("n0", "virtual"), ("n1", "physical"), ("n1", "virtual"), ("n1-capped", "virtual"),
        ("n3", "physical"), ("n3", "virtual"), ("n3-capped", "virtual")]
    uncapped = nn.EXPERIMENT.plan(settings.load(None, ["noisy_neighbour.cap_iops=0"]))
    assert not any(p.label.endswith("capped") for p in uncapped.blocks[0].points)
    assert len(plan.blocks) == 1 and [p.participants for p in plan.blocks[0].points][-1] == 4


def test_the_neighbours_job_spans_the_victims_run():
    c = settings.load(None, []).noisy_neighbour
    heavy = nn.neighbour_job(c, nn.lead_s("GuestAgent", 1))
    assert heavy.ramp_s == 0 and heavy.runtime_s == c.victim.ramp_s + c.victim.runtime_s + 2 * nn.LEAD_S
    assert nn.lead_s("GuestAgent", 3) >= nn.LEAD_S + 1.5   # several start together: their margin first
    assert (heavy.rw, heavy.bs, heavy.iodepth) == ("randwrite", "64k", 16)
    # a field set keeps the job's other defaults (QD1 stays QD1)
    c = settings.load(None, ["noisy_neighbour.victim.runtime_s=2", "noisy_neighbour.neighbour.iodepth=32"]).noisy_neighbour
    assert (c.victim.iodepth, c.victim.rw, c.victim.runtime_s) == (1, "randread", 2)
    assert (c.neighbour.rw, c.neighbour.bs, c.neighbour.iodepth, c.neighbour.ramp_s) == ("randwrite", "64k", 32, 0)


def test_a_neighbour_count_outside_the_fleet_is_refused_with_the_field():
    with pytest.raises(ConfigError, match="noisy_neighbour.neighbours"):
        settings.load(None, ["noisy_neighbour.neighbours=[0,16]"])


C = settings.load(None, []).noisy_neighbour


def test_the_victim_runs_while_the_neighbours_do_and_keeps_their_reports(monkeypatch):
    monkeypatch.setattr(nn, "LEAD_S", 0.05)
    seen = []

    def neighbours(job):
        seen.append(("neighbours start", time.monotonic()))
        time.sleep(0.2)
        return [Output("vm1", "{neighbour report}")]

    def victim():
        seen.append(("victim start", time.monotonic()))
        return [Output("vm0", "{victim report}")]
    (out,) = nn.with_neighbours(victim, neighbours, C, "GuestAgent", 1)
    assert [what for what, _ in seen] == ["neighbours start", "victim start"]
    assert out.raw == "{victim report}" and out.extra == {"neighbour-vm1.json": "{neighbour report}"}
    assert nn.with_neighbours(victim, None, C)[0].extra == {}   # alone


def test_a_neighbours_failure_fails_the_point_after_the_victim(monkeypatch):
    monkeypatch.setattr(nn, "LEAD_S", 0.01)

    def neighbours(job):
        raise RuntimeError("fio on vm1 exited 1")
    with pytest.raises(RuntimeError, match="the neighbours' job failed: fio on vm1 exited 1"):
        nn.with_neighbours(lambda: [Output("vm0", "{}")], neighbours, C, "GuestAgent", 1)
    stuck = threading.Event()
    monkeypatch.setattr(nn.fio, "timeout_s", lambda job: 0.01)
    with pytest.raises(TimeoutError, match="did not end within 0 s"):
        nn.with_neighbours(lambda: [Output("vm0", "{}")], lambda job: stuck.wait(2), C, "GuestAgent", 1)
    stuck.set()


def test_the_neighbours_error_comes_first_when_it_stopped_the_victim(monkeypatch):
    monkeypatch.setattr(nn, "LEAD_S", 0.01)
    failed = threading.Event()

    def neighbours(job):
        failed.set()
        raise RuntimeError("fio on vm1 exited 1")

    def victim():   # a failed participant's cancel stops the victim's command too
        failed.wait(2)
        raise RuntimeError("vm0: cancelled; killed /bin/sh in the guest")
    with pytest.raises(RuntimeError, match="the neighbours' job failed: fio on vm1 exited 1"):
        nn.with_neighbours(victim, neighbours, C, "GuestAgent", 1)
    assert not nn.CANCEL.is_set()   # the next point's commands run


def test_neighbours_that_started_late_do_not_count_as_beside_the_victim():
    raw = (Path(__file__).parents[2] / "fixtures" / "fio" / "guest-randread-qd16.json").read_text()
    victim = Output("vm0", raw)
    assert nn.uncovered(victim, [Output("vm1", raw)]) is None              # the same window
    late = Output("vm1", raw, clock_offset_s=-3.0)                          # its clock's window 3 s later here
    assert "vm1 ran from +3.0 s" in nn.uncovered(victim, [late])
    assert nn.uncovered(Output("vm0", "not fio's"), [late]) is None        # no window: the pipeline says why


class Dom:
    def __init__(self, xml):
        self.xml = xml

    def name(self):
        return "vtb-nn-ci-vm1"

    def XMLDesc(self, flags):
        return self.xml


def test_the_data_disk_is_found_by_its_serial():
    xml = """<domain><devices>
      <disk type='file' device='disk'><target dev='vda' bus='virtio'/></disk>
      <disk type='file' device='disk'><serial>vtb-data</serial><target dev='vdb' bus='virtio'/></disk>
    </devices></domain>"""
    assert iotune.data_disk_target(Dom(xml), "vtb-data") == "vdb"
    assert iotune.data_disk_target(Dom("<domain><devices/></domain>"), "vtb-data") is None


def sample(point, n, metric, value, rep):
    env, cap = ("physical" if "physical" in point else "virtual"), (200 if "capped" in point else 0)
    return Sample(metric, value, "us", {"experiment": "noisy-neighbour", "point": point, "neighbours": n, "env": env,
                                        "cap_iops": cap, "repeat": rep, "point_id": point})


def test_rows_give_each_places_p99_against_its_own_alone():
    samples = []
    for rep, jitter in enumerate((0, 5, -4)):
        for point, n, p99 in (("n0-virtual", 0, 400), ("n1-virtual", 1, 1200), ("n1-virtual-capped", 1, 500),
                              ("n0-physical", 0, 100), ("n1-physical", 1, 300)):
            samples += [sample(point, n, "lat_p99", p99 + jitter, rep), sample(point, n, "lat_p50", p99 / 2, rep)]
    rows = {(r["neighbours"], r["where"]): r for r in nn.neighbour_rows(samples)}
    assert rows[(0, "VM")]["against_alone"] == "-"
    assert rows[(1, "VM")]["against_alone"].startswith("3.00x")
    assert rows[(1, "VM, neighbours capped")]["against_alone"].startswith("1.25x")   # against the VM alone
    assert rows[(1, "host")]["against_alone"].startswith("3.00x")
