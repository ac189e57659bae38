"""A local Ceph cluster for real: 2 storage nodes (network namespaces on a bridge, links capped
with tc), all PGs active+clean, fio through librbd on the host with the node links carrying the
traffic, a bad plan refused before anything is made, and teardown after a crash (gc first, then
destroy) that leaves no daemon, namespace, bridge or file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import gc
from harness.ceph.plan import CephPlan, link_utilisation
from harness.hosts import LocalHost
from harness.workloads import fio

pytestmark = pytest.mark.integration
HARNESS = str(Path(sys.executable).parent / "harness")
NAME = "vtb-cit-ceph"
STATE = Path("/var/tmp/vtb-ci")


def harness(*args, check=True):
    out = subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def counters(dev: str) -> dict[str, int]:
    stats = Path("/sys/class/net", dev, "statistics")
    return {k: int((stats / k).read_text()) for k in ("rx_bytes", "tx_bytes")}


def test_a_bad_plan_is_refused_before_anything_is_made(tmp_path):
    plan = CephPlan(name=NAME, dir=str(STATE / f"{NAME}-bad"), nodes=6, replicas=7)
    (tmp_path / "plan.json").write_text(plan.to_json())
    out = harness("host", "ceph", "create", str(tmp_path / "plan.json"), check=False)
    assert out.returncode == 2 and "ceph.nodes=6: use 1 to 5" in out.stdout and "Traceback" not in out.stderr
    assert not Path(plan.dir).exists() and not gc.leftovers(NAME)


def test_a_two_node_cluster_serves_rbd_then_goes_without_a_trace(tmp_path):
    plan = CephPlan(name=NAME, dir=str(STATE / NAME), nodes=2, pg_num=16, link_mbit=200)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    try:
        out = harness("host", "ceph", "create", str(plan_file))
        assert "all PGs active+clean" in out.stdout
        assert "already up" in harness("host", "ceph", "create", str(plan_file)).stdout   # idempotent
        conf = f"{plan.dir}/ceph.conf"
        tree = json.loads(subprocess.run(["ceph", "-c", conf, "osd", "tree", "-f", "json"], capture_output=True,
                                         text=True, check=True).stdout)
        hosts = {n["name"] for n in tree["nodes"] if n["type"] == "host"}
        assert hosts == {plan.node_name(1), plan.node_name(2)}
        pool = plan.pool(2)
        subprocess.run(["rbd", "-c", conf, "create", f"{pool}/img", "--size", "64"], check=True)
        before, t0 = {k: counters(plan.veth(k)) for k in (1, 2)}, time.monotonic()
        done = subprocess.run(["fio", "--name=w", "--ioengine=rbd", "--clientname=admin", f"--pool={pool}",
                               "--rbdname=img", "--rw=write", "--bs=128k", "--iodepth=8", "--size=32m",
                               "--output-format=json"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "CEPH_CONF": conf})
        assert done.returncode == 0, done.stderr
        seconds = time.monotonic() - t0   # the counters' time base: all of fio's traffic, set-up included
        assert fio.parse(done.stdout).bw_kib_s > 0
        use = [link_utilisation(before[k], counters(plan.veth(k)), seconds, plan.link_mbit) for k in (1, 2)]
        assert all(u["rx_mbit_s"] > 0 for u in use), use   # the writes went over both nodes' links
        assert all(u["utilisation"] <= 1.5 for u in use), use   # and the cap held them (tbf bursts aside)
    finally:
        removed = gc.collect(NAME, LocalHost())   # as after a SIGKILL: by the prefix alone
        print(removed)
        harness("host", "ceph", "destroy", str(plan_file))
    assert any("ceph-osd" in r for r in removed) and any(r.startswith("namespace") for r in removed)
    assert any(r.startswith("link") and f"({NAME})" in r for r in removed)   # the bridge, by its alias
    assert not gc.leftovers(NAME) and not Path(plan.dir).exists()
