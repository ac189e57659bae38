"""queue-depth for real under TCG: two depths of virtio-blk against the host, each a point of the
sweep fleet's block; the curve's table, its verdict per environment and its plots."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_harness import harness

from harness.fleet import gc

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"


@pytest.mark.extended(why="a depth sweep on the fio matrix, whose engine make test's backends run drives")
@pytest.mark.covers(experiments="queue-depth")
def test_queue_depth_of_virtio_blk_against_the_host(tmp_path):
    harness("run", "queue-depth", "--backend", "virtio-blk", "--iodepths", "1,8", "--runtime", "1", "--ramp", "0",
            "--set", "repeat.count=2", "--set", f"results_dir={tmp_path}", "--config", str(CONFIG))
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    iops = {(r["backend"], r["iodepth"]) for r in rows if r["metric"] == "iops" and r["status"] == "ok"
            and r["repeat"] != "all"}
    assert iops == {(b, d) for b in ("host", "virtio-blk") for d in (1, 8)}
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    summary = (run / "summary.txt").read_text()
    assert "gain over previous QD" in summary and "host: " in summary and "virtio-blk: " in summary
    assert all((run / f).read_bytes()[:4] == b"\x89PNG" for f in ("queue-depth.png", "queue-depth-curves.png"))
    assert gc.leftovers("vtb-sw-ci-") == []
