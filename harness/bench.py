"""`harness bench`: what the harness itself costs, measured on a fleet of its own (vtb-bench-*).

- cold and warm `testbed up`, and seconds until every guest agent answers;
- guest-ping after QEMU start (the fast-boot target: under 10 s under TCG);
- orchestration overhead per measured point: point wall time minus fio runtime and ramp;
- agreement: harness-measured physical IOPS against plain fio typed by hand on the same device.
"""
from __future__ import annotations

import json
import subprocess
import time

import libvirt
from rich.table import Table

from harness import runner
from harness.agent import GuestAgent
from harness.config import Config
from harness.console import console, step
from harness.store import write_atomic
from harness.testbed import Testbed
from harness.workloads import fio


def _timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def _qemu_start_to_ping(uri: str, name: str) -> float:
    conn = libvirt.open(uri)
    try:
        dom = conn.lookupByName(name)
        dom.destroy()
        t0 = time.monotonic()
        dom.create()
        GuestAgent(dom).wait_ready(120)
        return time.monotonic() - t0
    finally:
        conn.close()


def _plain_fio_iops(cfg: Config, device: str, size: int) -> float:
    """The same job as the harness's n=1 physical point, typed as a plain fio command line."""
    j = cfg.vm_scaling.job
    argv = ["fio", "--name=plain", f"--filename={device}", "--offset=0", f"--size={size}", f"--rw={j.rw}",
            f"--bs={j.bs}", f"--iodepth={j.iodepth}", f"--numjobs={j.numjobs}", f"--ioengine={j.ioengine}",
            f"--direct={int(j.direct)}", f"--runtime={j.runtime_s}", f"--ramp_time={j.ramp_s}", "--time_based",
            "--group_reporting", "--randrepeat=0", "--norandommap", "--output-format=json"]
    return fio.parse(subprocess.run(argv, capture_output=True, text=True, check=True).stdout).iops


def run(user_cfg: Config, runtime: int) -> dict:
    cfg = user_cfg.model_copy(update={
        "fleet": user_cfg.fleet.model_copy(update={"name": "bench"}),
        "vm_scaling": user_cfg.vm_scaling.model_copy(update={
            "vm_counts": list(range(1, user_cfg.fleet.vms + 1)),
            "job": user_cfg.vm_scaling.job.model_copy(update={"runtime_s": runtime, "ramp_s": 1})})})
    tb = Testbed(cfg, run_scoped=True)
    tb.down(quiet=True)
    figures: dict = {}
    try:
        step("bench: cold testbed up (image and provider cached)")
        figures["cold_up_s"], record = _timed(tb.up)
        figures["agents_ready_s"] = max(record.ready_s.values())
        step("bench: warm testbed up (fleet already up)")
        figures["warm_up_s"], _ = _timed(tb.up)
        figures["qemu_start_to_guest_ping_s"] = _qemu_start_to_ping(record.uri, record.vms[0].name)
        step("bench: vm-scaling for orchestration overhead and the physical baseline")
        ctx = runner.run(cfg, "vm-scaling")
        budget = runtime + 1
        overheads = {s.metadata["point"]: s.metadata["point_wall_s"] - budget for s in ctx.store.samples
                     if s.metric == "aggregate_iops" and s.status == "ok"}
        figures["overhead_per_point_s"] = overheads
        harness_iops = next(s.value for s in ctx.store.samples if s.metric == "aggregate_iops"
                            and s.metadata["point"] == "physical-n1")
        plain = _plain_fio_iops(cfg, record.device_path, record.vms[0].slice_bytes)
        figures.update(harness_physical_iops=harness_iops, plain_fio_iops=plain,
                       harness_to_plain_ratio=harness_iops / plain, accel=record.accel["accel"],
                       vms=len(record.vms), runtime_s=runtime, run_id=ctx.store.run_id)
    finally:
        step("bench: tearing down the bench fleet")
        tb.down(quiet=True)
    table = Table(title=f"harness bench (accel={figures.get('accel')})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for k, v in figures.items():
        if isinstance(v, dict):
            for point, s in v.items():
                table.add_row(f"{k} ({point})", f"{s:.2f}")
        else:
            table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    console.print(table)
    write_atomic(cfg.results_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json", json.dumps(figures, indent=2))
    return figures
