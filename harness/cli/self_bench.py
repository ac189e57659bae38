"""`harness bench`: what the harness itself costs, measured on a fleet of its own (vtb-bench-*).

- cold and warm `testbed up`, and seconds until every guest agent answers;
- guest-ping after QEMU start (the fast-boot target: under 10 s under TCG);
- agent-ready seconds after `terraform apply` for 1, 2 and 8 VMs, booted and restored;
- orchestration overhead per point, the settle wait included (and the settle wait alone);
- fidelity: harness-measured physical IOPS over plain fio typed by hand on the same device and
  job, interleaved FIDELITY_PAIRS (40) times: the mean ratio with its 95% CI;
- a local Ceph cluster of 3 storage nodes: seconds from nothing to every PG active+clean;
- what reading fio's reports costs: per output (one-job and per-job parsers), and the percentiles
  of a run's merged histograms;
- the images' sizes (the guest's and the nested host's qcow2, the guest's initramfs);
- with --nested, the nested host's own: `host nested up` from nothing, the KVM probe inside it, an
  L2 fleet of 1 VM to its agent, an md array of its drives made and removed, `host nested down`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import time

from rich.table import Table

from harness.analysis.stats import summarize
from harness.common import paths
from harness.common.console import console, step, warn
from harness.common.exits import StepFailed
from harness.common.files import write_atomic
from harness.config.core import Config
from harness.engine import runner
from harness.fleet import vm_start
from harness.fleet.testbed import Testbed
from harness.hosts import LocalHost, accel, environment
from harness.hosts.nested import DOMAIN as NESTED_DOMAIN
from harness.hosts.nested import HOST_IMAGE_DIR
from harness.libvirt.agent import GuestAgent
from harness.libvirt.libvirt_conn import connect, domain_call
from harness.resources import nested_l1, raid
from harness.resources.ceph import local as ceph_local
from harness.resources.ceph.bootstrap import missing_tools
from harness.resources.ceph.plan import CephPlan
from harness.workloads import fio, fio_output


def _timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def _qemu_start_to_ping(uri: str, name: str) -> float:
    conn = connect(uri)
    try:
        dom = conn.lookupByName(name)
        domain_call(dom, "destroy")
        t0 = time.monotonic()
        domain_call(dom, "create")
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
            "--group_reporting", "--randrepeat=0", "--norandommap", "--output-format=json",
            f"--unified_rw_reporting={int(fio.mixed(j.rw))}"]
    return fio.parse(subprocess.run(argv, capture_output=True, text=True, check=True,
                                    timeout=j.runtime_s + j.ramp_s + 120).stdout).iops


def _machine(accel: dict) -> str:
    """The CPU model, its cores and memory: what the figures depend on beside the accelerator."""
    env = environment.collect(accel)
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{env.get('cpu_model') or 'unknown CPU'}, {os.cpu_count()} cores, {mem:.0f} GiB"


def _parse_costs(raw_dir, rounds: int = 20) -> dict:
    """What reading fio's reports costs the harness, on the run's own raw outputs (json+): per
    output, vtb's one-job parser and the per-job one; per point, the percentiles of its merged
    histograms."""
    parsed = {}   # raw -> its result; a failed point's kept output is no report
    for path in sorted(raw_dir.rglob("*.json")):
        with contextlib.suppress(fio.FioError):
            parsed[text] = fio.parse(text := path.read_text())
    if not parsed:
        return {}
    raws, bins = list(parsed), [r.bins_ns for r in parsed.values()]
    t_one, _ = _timed(lambda: [fio.parse(r) for _ in range(rounds) for r in raws])
    t_jobs, _ = _timed(lambda: [fio.parse_jobs(r) for _ in range(rounds) for r in raws])
    t_merge, _ = _timed(lambda: [fio_output.merged_percentiles(bins) for _ in range(rounds)])
    n = rounds * len(raws)
    return {"fio_parse_ms_per_output": 1000 * t_one / n, "fio_parse_jobs_ms_per_output": 1000 * t_jobs / n,
            f"percentiles_of_{len(bins)}_merged_histograms_ms": 1000 * t_merge / rounds}


def _ceph_up_s(cfg: Config) -> float | str:
    """Seconds for a Ceph cluster's create hook, 3 nodes (1 OSD each) from nothing; the cluster goes after."""
    host = LocalHost()
    if missing := missing_tools(host):
        return f"n/a ({', '.join(missing)} missing)"
    name = "vtb-bench-ceph"
    plan = CephPlan(name=name, dir=str(cfg.state_dir / name), nodes=3, pg_num=32)
    try:
        seconds, _ = _timed(lambda: ceph_local.create(host, plan))
        return seconds
    except ceph_local.CephError as e:
        warn(f"bench: the Ceph cluster did not come up: {e}")
        return "failed"
    finally:
        ceph_local.destroy(host, plan)


BRING_UP_VMS = (1, 2, 8)


def _bring_up(cfg: Config) -> dict:
    """Seconds from `terraform apply` until every guest agent answers, for 1, 2 and 8 VMs, booted
    and restored from the saved template (made first when there is none, and timed apart)."""
    def up(vms: int, restore: bool) -> tuple[float, dict]:
        tb = Testbed(cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={
            "name": "bench-up", "vms": vms, "restore": restore})}), run_scoped=True)
        tb.down(quiet=True)
        try:
            record = tb.up()
            return max(record.ready_s.values()), record.started
        finally:
            tb.down(quiet=True)
    figures: dict = {}
    step("bench: a restore of 1 VM (its template is saved first when there is none)")
    figures["first_restore_up_1_vm_s"], started = up(1, True)
    if any(s["reason"] == vm_start.FIRST_SIGHTING for s in started.values()):   # a one-VM shape is saved the second time
        figures["first_restore_up_1_vm_s"], _ = up(1, True)
    for vms in BRING_UP_VMS:
        for restore in (False, True):
            step(f"bench: {vms} VM(s) agent-ready, {'restored' if restore else 'booted'}")
            seconds, started = up(vms, restore)
            hows = sorted({s["how"] for s in started.values()})
            figures[f"agents_ready_{vms}_vms_{'restored' if restore else 'booted'}_s"] = (
                seconds if hows == (["restored"] if restore else ["booted"]) else f"{seconds:.1f} ({'/'.join(hows)})")
    step("bench: QEMU start to guest-ping with the generic kernel (f2fs, nilfs2)")
    tb = Testbed(cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={
        "name": "bench-up", "vms": 1, "kernel": "generic"})}), run_scoped=True)
    try:
        record = tb.up()
        figures["qemu_start_to_guest_ping_generic_kernel_s"] = _qemu_start_to_ping(record.uri, record.vms[0].name)
    finally:
        tb.down(quiet=True)
    return figures


def _image_sizes() -> dict:
    """The images' sizes, MiB: what a fresh machine builds and a nested host's upload would carry."""
    files = {"guest_image_qcow2_mib": paths.IMAGE_DIR / "rootfs.qcow2", "guest_initramfs_mib": paths.IMAGE_DIR / "initrd.img",
             "full_guest_image_qcow2_mib": paths.FULL_IMAGE_DIR / "rootfs.qcow2",
             "nested_host_image_qcow2_mib": HOST_IMAGE_DIR / "rootfs.qcow2"}
    return {key: f.stat().st_size / 2**20 for key, f in files.items() if f.exists()}


def _nested_host_runs() -> bool:
    conn = connect(paths.LIBVIRT_URI)
    try:
        return any(d.name().startswith(NESTED_DOMAIN) for d in conn.listAllDomains())
    finally:
        conn.close()


def _nested(user_cfg: Config) -> dict:
    """The nested host's own costs, on one booted from nothing and removed after. Not measured
    while a nested host runs here: the nested hosts' domain names are every state dir's."""
    if user_cfg.hosts:
        warn("bench: no nested host's figures with [[hosts]]")
        return {}
    if _nested_host_runs():
        warn(f"bench: the nested host's figures are not measured: {NESTED_DOMAIN} runs here (`harness host nested "
             "down` first)")
        return {}
    cfg = user_cfg.model_copy(update={"host": user_cfg.host.model_copy(update={"kind": "nested"}),
                                       "fleet": user_cfg.fleet.model_copy(update={"name": "bench-nested", "vms": 1})})
    figures: dict = {}
    try:
        _measure_nested(cfg, figures)
    except StepFailed as e:   # the figures measured so far are kept, and the others' failure said
        warn(f"bench: the nested host's figures stopped: {e}")
        figures["nested_failed"] = str(e).splitlines()[0]
    finally:
        step("bench: removing the nested host")
        figures["nested_down_s"], _ = _timed(lambda: nested_l1.down(cfg.state_dir))
    return figures


def _measure_nested(cfg: Config, figures: dict) -> None:
    """Into `figures`, as each is measured: the nested host up from nothing, the KVM probe inside
    it, an L2 fleet of 1 VM to its agent, RAID 5 of its drives made and removed."""
    step("bench: the nested host from nothing")
    figures["nested_up_s"], host = _timed(lambda: nested_l1.up(cfg.nested_place))
    # the probe a fleet's bring-up makes, cached for this boot of the L1: the fleet below reuses it
    seconds, choice = _timed(lambda: accel.choose("auto", paths.IMAGE_DIR / "vmlinuz", host))
    figures["nested_kvm_probe_s"] = seconds if choice.accel == "kvm" else f"failed: {choice.reason}"
    step("bench: an L2 fleet of 1 VM in the nested host")
    tb = Testbed(cfg, host, run_scoped=True)
    try:
        figures["nested_l2_agents_ready_1_vm_s"] = max(tb.up().ready_s.values())
    finally:
        tb.down(quiet=True)
    drives = host.record.drives
    step(f"bench: RAID 5 of the nested host's {len(drives)} drives, made and removed")
    array = raid.RaidPlan(name="vtb-bench-nested-md", level=5, members=drives, chunk_kib=64, allow=drives,
                          host=host.descriptor())
    try:
        figures["nested_raid5_create_s"], _ = _timed(lambda: raid.create(host, array))
    finally:
        figures["nested_raid5_destroy_s"], _ = _timed(lambda: raid.destroy(host, array))


FIDELITY_PAIRS = 40  # pair ratios vary about 14% (CV) on a shared disk: 40 pairs bring the CI within ±5%


def _fidelity(ctx, cfg: Config, record) -> dict:
    """Harness physical IOPS over plain fio, same device region and job, interleaved
    FIDELITY_PAIRS times (plain first, then the pipeline's point): the mean ratio and its 95% CI."""
    from harness.experiments.vm_scaling import EXPERIMENT as vm_scaling
    physical = next(p for p in vm_scaling.points(ctx, ctx.testbed) if p.id == "physical-n1")
    pipeline = ctx.pipeline(record.uri, (record.prefix + "-",))
    pipeline.repeat = cfg.repeat.model_copy(update={"count": 1, "adaptive": False})
    ratios = []
    for i in range(FIDELITY_PAIRS):
        step(f"bench: fidelity pair {i + 1}/{FIDELITY_PAIRS}")
        plain = _plain_fio_iops(cfg, record.device_path, record.vms[0].slice_bytes)
        point = dataclasses.replace(physical, id=f"fidelity-{i}")
        pipeline.measure([point], record.metadata())
        values = pipeline.values(point.id, "aggregate_iops")
        if values:
            ratios.append(values[0] / plain)
    st = summarize(ratios)
    return {"harness_to_plain_ratio": st.mean, "harness_to_plain_ci95": st.ci95 or 0.0,
            "harness_to_plain_pairs": len(ratios)}


def run(user_cfg: Config, runtime: int, nested: bool = False) -> dict:
    cfg = user_cfg.model_copy(update={
        "fleet": user_cfg.fleet.model_copy(update={"name": "bench"}),
        "vm_scaling": user_cfg.vm_scaling.model_copy(update={
            "vm_counts": list(range(1, user_cfg.fleet.vms + 1)),
            "job": user_cfg.vm_scaling.job.model_copy(update={"runtime_s": runtime, "ramp_s": 1})})})
    tb = Testbed(cfg, run_scoped=True)
    tb.down(quiet=True)
    figures: dict = {}
    figures.update(_bring_up(cfg))
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
        walls: dict[str, list[tuple[float, float]]] = {}
        for s in ctx.store.samples:
            if s.metric == "aggregate_iops" and s.status == "ok" and s.metadata.get("repeat") != "all":
                walls.setdefault(s.metadata["point"], []).append(
                    (s.metadata["point_wall_s"] - budget, s.metadata["settle_wait_s"]))
        # wall time minus fio's runtime and ramp, the settle wait included; and the settle wait alone
        figures["overhead_per_point_s"] = {p: sum(w for w, _ in v) / len(v) for p, v in sorted(walls.items())}
        figures["settle_wait_per_point_s"] = {p: sum(w for _, w in v) / len(v) for p, v in sorted(walls.items())}
        figures.update(_fidelity(ctx, cfg, record), accel=record.accel["accel"], vms=len(record.vms),
                       runtime_s=runtime, run_id=ctx.store.run_id, measured_on=time.strftime("%Y-%m-%d"),
                       machine=_machine(record.accel))
        figures.update(_parse_costs(ctx.store.dir / "raw"))
        step("bench: a local Ceph cluster of 3 storage nodes, from nothing to all PGs active+clean")
        figures["ceph_3_nodes_active_clean_s"] = _ceph_up_s(cfg)
        figures.update(_image_sizes())
    finally:
        step("bench: tearing down the bench fleet")
        tb.down(quiet=True)
    if nested:
        figures.update(_nested(cfg))
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
