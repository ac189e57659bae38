"""The tuning study's design (one knob at a time, a full factorial, refusals in the plan) and its
answer (a configuration that wins, one that ties, one that loses)."""
import json
from pathlib import Path

import pytest

from harness import backends
from harness.engine import settings
from harness.experiments import registry, tuning
from harness.experiments.tuning import Configuration, design, factorial, knob_values, one_at_a_time, qemu_refusal
from harness.experiments.tuning_answer import DEFAULT, collect, decide, idle_knobs, winner

BASE = {"aio": "native", "cache": "none", "iothreads": 1, "num_queues": 1}
KNOBS = {"aio": ("native", "io_uring"), "iothreads": (1, 0)}


def test_one_knob_at_a_time_around_the_configured_disk():
    labels = [c.label for c in one_at_a_time(BASE, KNOBS)]
    assert labels == ["default", "aio=io_uring", "iothreads=0"]


def test_a_full_factorial_has_every_combination_once_the_default_first():
    labels = [c.label for c in factorial(BASE, KNOBS)]
    assert labels[0] == "default" and sorted(labels[1:]) == ["aio=io_uring", "aio=io_uring,iothreads=0", "iothreads=0"]
    assert Configuration((("aio", "io_uring"),)).disk(BASE) == {**BASE, "aio": "io_uring"}


def test_the_backend_declares_its_knobs_and_the_values_are_typed_as_its_own():
    blk = backends.get("virtio-blk")
    assert set(knob_values(blk, {})) == {"aio", "cache", "iothreads", "num_queues", "queue_size"}
    assert knob_values(blk, {"iothreads": ["0", "1"]}) == {"iothreads": (0, 1)}
    with pytest.raises(ValueError, match="no knob 'queue_depth'; its knobs: aio, cache, iothreads, num_queues, queue_size"):
        knob_values(blk, {"queue_depth": ["1"]})
    with pytest.raises(ValueError, match="aio=posix is not a value virtio-blk tries; choose from native,io_uring,threads"):
        knob_values(blk, {"aio": ["posix"]})
    assert set(knob_values(backends.get("nvme"), {})) == {"aio", "cache", "num_queues"}   # no iothread in QEMU 7.2's nvme


def test_the_default_design_refuses_what_the_config_refuses_naming_the_knob_and_the_fix():
    cfg = settings.load(None, [])
    kept, refused = design(cfg)
    assert [c.label for c in kept] == ["default", "aio=io_uring", "aio=threads", "cache=directsync", "iothreads=0",
                                       "num_queues=2", "num_queues=4", "queue_size=1024"]
    assert set(refused) == {"cache=writeback"}
    assert "aio=native needs cache=none or directsync" in refused["cache=writeback"]
    assert "--knob aio=io_uring --knob cache=writeback --full" in refused["cache=writeback"]
    full = settings.load(None, ['tuning.knobs=["aio=native,io_uring", "cache=none,writeback"]', "tuning.full=true"])
    kept, refused = design(full)
    assert sorted(c.label for c in kept) == ["aio=io_uring", "aio=io_uring,cache=writeback", "default"]
    assert list(refused) == ["cache=writeback"] and "--full" not in refused["cache=writeback"]   # it is the config's


def test_a_design_with_nothing_to_compare_is_refused_before_anything_starts():
    cfg = settings.load(None, ['tuning.knobs=["cache=writeback"]'])
    assert "no configuration to compare with the configured disk" in registry()["tuning"].refusal(cfg)
    assert registry()["tuning"].refusal(settings.load(None, [])) is None


def test_qemu_itself_judges_a_block_node(tmp_path):
    assert qemu_refusal(BASE, tmp_path) is None
    assert "requires cache.direct=on" in qemu_refusal({**BASE, "cache": "writeback"}, tmp_path)


def test_the_plan_shows_what_this_machines_qemu_refuses_as_the_run_does(monkeypatch, tmp_path):
    cfg = settings.load(None, [f"state_dir={tmp_path}", 'tuning.knobs=["aio=native,threads,io_uring"]'])
    plan = registry()["tuning"].plan(cfg)   # this machine's QEMU accepts each of them
    assert [b.label for b in plan.blocks] == ["virtio-blk default", "virtio-blk aio=threads", "virtio-blk aio=io_uring"]
    said = "aio=io_uring is not supported by this QEMU build"   # as a QEMU without liburing would refuse it
    monkeypatch.setattr(tuning, "qemu_refusal", lambda disk, folder: said if disk["aio"] == "io_uring" else None)
    plan = registry()["tuning"].plan(cfg)
    assert [b.label for b in plan.blocks] == ["virtio-blk default", "virtio-blk aio=threads"]
    assert plan.skipped == {"virtio-blk aio=io_uring": said}
    nested = settings.load(None, [f"state_dir={tmp_path}", "host.kind=nested", 'tuning.knobs=["aio=native,io_uring"]'])
    assert len(registry()["tuning"].plan(nested).blocks) == 2   # another host's QEMU judges at its run


def _rows(choice: str, ratios: list[float], workload: str = "randread-qd1", metric: str = "iops") -> list[dict]:
    """A configuration's repeats: the host at 1000 each round, the VM at ratio x 1000."""
    common = {"group": "tuning", "status": "ok", "workload": workload, "choice": choice, "headline": metric,
              "metric": metric}
    return [row for i, r in enumerate(ratios) for row in (
        {**common, "env": "physical", "repeat": i, "value": 1000.0},
        {**common, "env": "virtual", "repeat": i, "value": 1000.0 * r})]


def test_a_configuration_that_wins_one_that_ties_and_one_that_loses():
    rows = (_rows(DEFAULT, [0.50, 0.52, 0.51]) + _rows("aio=io_uring", [0.70, 0.72, 0.71])     # wins by ~40%
            + _rows("iothreads=0", [0.49, 0.53, 0.51])                                       # ties
            + _rows("num_queues=2", [0.30, 0.31, 0.29]))                                      # loses
    (w,) = collect(rows)
    decide([w])
    assert w.best().label == "aio=io_uring"
    assert w.choices["aio=io_uring"].against_default.change == pytest.approx(0.39, abs=0.02)
    assert not w.choices["iothreads=0"].differs() and w.choices["num_queues=2"].differs()
    assert not w.choices["num_queues=2"].lead
    assert idle_knobs([w]) == {"iothreads": ["0"]}
    assert winner([w]) == "aio=io_uring"


def test_no_lead_keeps_the_configured_disk():
    rows = _rows(DEFAULT, [0.50, 0.52, 0.51]) + _rows("aio=io_uring", [0.49, 0.53, 0.50])
    found = collect(rows)
    decide(found)
    assert found[0].best() is None and winner(found) == DEFAULT


def test_a_recorded_run_where_no_setting_leads_keeps_the_configured_disk():
    """`harness run tuning --knob aio=native,threads --knob cache=none,writeback --full` on
    write-128k-j4 and randread-qd1, 4 s points, 3 repeats, under TCG (its rows as recorded)."""
    recorded = Path(__file__).parents[2] / "fixtures" / "runs" / "tuning-aio-cache.samples.jsonl"
    found = collect([json.loads(line) for line in recorded.read_text().splitlines()])
    decide(found)
    assert [w.name for w in found] == ["randread-qd1", "write-128k-j4"]
    assert set(found[0].choices) == {"default", "aio=threads", "aio=threads,cache=writeback"}
    assert all(w.best() is None for w in found) and winner(found) == DEFAULT
    assert idle_knobs(found) == {"aio": ["threads"], "cache": ["writeback"]}


def test_a_recorded_run_where_a_setting_leads_names_it_with_its_lead_and_interval():
    """`harness run tuning --set 'tuning.workloads=["randwrite-qd1"]' --set disk.aio=io_uring --set
    disk.cache=directsync --knob cache=none,writeback --runtime 4` under TCG (its rows as recorded):
    a flush after every 4 KiB write costs the configured disk; the host's page cache wins most."""
    recorded = Path(__file__).parents[2] / "fixtures" / "runs" / "tuning-cache-randwrite.samples.jsonl"
    found = collect([json.loads(line) for line in recorded.read_text().splitlines()])
    decide(found)
    (w,) = found
    best = w.best()
    assert w.name == "randwrite-qd1" and best.label == "cache=writeback" and winner(found) == "cache=writeback"
    assert best.against_default.change == pytest.approx(-0.47, abs=0.01)
    assert best.against_default.high < 1 and best.lead   # its whole interval is below the configured disk's latency
    assert w.choices["cache=none"].differs() and idle_knobs(found) == {}
