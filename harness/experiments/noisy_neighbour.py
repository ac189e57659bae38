"""`harness run noisy-neighbour`: one VM's QD1 latency distribution while 0, 1 or 3 other VMs on
the same device run a heavy job, with and without libvirt's I/O limits (`iotune`) on those
neighbours. The host measures the same on its slots of the device (the victim's slot at QD1, the
neighbours' slots under the heavy job), without limits: the baseline each VM point is paired with.

The experiment brings up a fleet of its own (vtb-nn-*: the victim and the most neighbours asked
for), on the config's backend. The neighbours start `lead_s` before the victim and stop after it,
so every request the victim times meets them; their own fio reports are kept beside the victim's.
A capped point sets `total_iops_sec` on each neighbour's data disk while it runs (a live change,
undone afterwards); a backend whose disk libvirt does not drive (vhost-user, NVMe through QEMU's
command line) has no such limit, so its capped points are skipped with that reason.

Config section [noisy_neighbour]."""
from __future__ import annotations

import contextlib
import threading
import time
from functools import partial

from pydantic import Field, field_validator
from rich.table import Table

from harness.analysis.stats import difference, p_text, summarize
from harness.common.cancel import CANCEL
from harness.common.console import step
from harness.common.exits import StepFailed
from harness.common.files import write_atomic
from harness.common.schema import StudySection
from harness.config.core import Config
from harness.experiments import CONFIG_BACKEND, Flag, RunContext, full_flag
from harness.fleet.testbed import TestbedRecord
from harness.libvirt import iotune
from harness.libvirt.agent import GuestAgent
from harness.measure import sweep
from harness.measure.declaration import Declared, DeclaredBlock, plan_of
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Point
from harness.measure.plan import Plan
from harness.report import tables
from harness.results.columns import I, S, column
from harness.results.environment import accel_label, tcg_caveat
from harness.results.outputs import Output
from harness.results.samples import Sample
from harness.workloads import fio

LEAD_S = 2       # the neighbours' job goes this long before the victim starts (their start's margin on top)


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("noisy-neighbour", [
    column("neighbours", I, "busy VMs beside the measured one (host slots on a physical point)"),
    column("cap_iops", I, "libvirt iotune total_iops_sec on each neighbour's disk (0: none)", "IOPS"),
    column("neighbour_rw", S, "the neighbours' fio rw"),
    column("neighbour_bs", S, "the neighbours' fio block size"),
    column("neighbour_iodepth", I, "the neighbours' fio iodepth"),
]),)


class VictimJob(fio.FioJob):
    """The measured VM's job: QD1 random reads, its latency distribution."""
    rw: fio.FioJob.model_fields["rw"].annotation = Field("randread", description="fio access pattern")
    iodepth: int = Field(1, ge=1, le=4096, description="queue depth (1: each request alone)")


class NeighbourJob(fio.FioJob):
    """Each neighbour's heavy job (its runtime follows the victim's)."""
    rw: fio.FioJob.model_fields["rw"].annotation = Field("randwrite", description="fio access pattern")
    bs: fio.FioJob.model_fields["bs"].annotation = Field("64k", description="block size")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth per fio job")
    ramp_s: int = Field(0, ge=0, le=3600, description="not used: the neighbours run over the victim's whole run")


class Settings(StudySection):
    FULL = {"neighbours": [0, 1, 2, 3, 5, 7]}
    neighbours: list[int] = Field([0, 1, 3], min_length=1, description="counts of busy neighbour VMs, each a "
                                                                      "point (0: the victim alone)")
    cap_iops: int = Field(200, ge=0, le=1_000_000, description="libvirt iotune total_iops_sec on each neighbour's "
                                                              "disk in the capped points (0: no capped points)")
    victim: VictimJob = Field(VictimJob(), description="the measured VM's job")
    neighbour: NeighbourJob = Field(NeighbourJob(), description="each neighbour's heavy job")

    @field_validator("neighbours")
    @classmethod
    def _counts(cls, counts: list[int]) -> list[int]:
        if bad := [n for n in counts if not 0 <= n <= 15]:
            raise ValueError(f"neighbour counts must be 0-15 (the fleet is the victim and the most neighbours), got {bad}")
        return sorted(set(counts))


def lead_s(kind: str, n: int) -> float:
    """How long before the victim the neighbours start: LEAD_S, and for several (a shared start) the
    margin their start allows now for n participants of this kind (learnt as the run goes)."""
    return LEAD_S + (fio.SHARED_START.margin_s([kind] * n) if n > 1 else 0.0)


def neighbour_job(c: Settings, lead: float) -> fio.FioJob:
    """The heavy job, timed to run over the whole of the victim's run, `lead` seconds on each side."""
    return c.neighbour.model_copy(update={"runtime_s": c.victim.ramp_s + c.victim.runtime_s + round(2 * lead + 0.5),
                                          "ramp_s": 0})


def with_neighbours(victim, neighbours, c: Settings, kind: str = "", n: int = 0) -> list[Output]:
    """The victim's run while n neighbours of a kind of node (`neighbours(job)`) run the heavy job,
    started lead_s before it: the victim's output, the neighbours' raw reports kept beside it. The
    point fails when a neighbour failed (its error first: a failed participant stops the others'
    commands too), when the neighbours did not run over the whole of the victim's measured run, and
    when they outlast fio's own bound on their job."""
    if not n:
        return victim()
    lead = lead_s(kind, n)
    heavy = neighbour_job(c, lead)
    bound_s, done = fio.timeout_s(heavy), {}

    def busy():
        try:
            done["outputs"] = neighbours(heavy)
        except BaseException as e:   # handed to the point's thread, which raises it
            done["error"] = e

    thread = threading.Thread(target=busy, name="vtb-neighbours", daemon=True)
    thread.start()
    try:
        time.sleep(lead)
        outputs = victim()
    except BaseException as e:
        CANCEL.set()   # the neighbours' commands stop too (as a failed participant's do)
        thread.join(bound_s)
        if not isinstance(e, (KeyboardInterrupt, SystemExit)):
            CANCEL.clear()   # the next point starts afresh (as in_parallel leaves it)
        if "error" in done:
            raise StepFailed(f"the neighbours' job failed: {done['error']}") from done["error"]
        raise
    thread.join(bound_s)
    if thread.is_alive():
        raise TimeoutError(f"the neighbours' job did not end within {bound_s:.0f} s (fio's bound on it)")
    if "error" in done:
        raise StepFailed(f"the neighbours' job failed: {done['error']}") from done["error"]
    if why := uncovered(outputs[0], done["outputs"]):
        raise StepFailed(f"not measured beside its neighbours: {why}")
    for out in outputs:
        out.extra.update({f"neighbour-{n.who}.json": n.raw for n in done["outputs"]})
    return outputs


def uncovered(victim: Output, neighbours: list[Output], slack_s: float = 0.5) -> str | None:
    """Why the neighbours' runs (fio's report windows, on this machine's clock) do not span the
    victim's measured run, or None (also where a report gives no window: the pipeline says why)."""
    def window(out: Output) -> tuple[float, float] | None:
        w = fio.window_of(out.raw)
        return (w[0] - out.clock_offset_s, w[1] - out.clock_offset_s) if w else None
    v = window(victim)
    for n in neighbours:
        if v and (w := window(n)) and (w[0] > v[0] + slack_s or w[1] < v[1] - slack_s):
            return (f"{n.who} ran from {w[0] - v[0]:+.1f} s to {w[1] - v[1]:+.1f} s of the victim's measured "
                    "run's start and end (a late shared start: the next point allows more)")
    return None


def cap_refusal(record: TestbedRecord) -> str | None:
    """Why this fleet's neighbours cannot be capped (no <disk> libvirt drives), or None."""
    vm, why = record.vms[0], f"backend {record.disk['backend']} gives libvirt no <disk> to limit (iotune needs one)"
    if not vm.locator.startswith("serial:"):
        return why
    return None if iotune.has_disk(record.uri, vm.name, vm.locator.removeprefix("serial:")) else why


def disks(vms: list) -> list[tuple[str, str]]:
    """The VMs' data disks as iotune finds them: (domain, serial)."""
    return [(vm.name, vm.locator.removeprefix("serial:")) for vm in vms]


class NoisyNeighbour:
    question = "One VM's QD1 latency beside 0, 1, 3 busy VMs, iotune or not"
    name = "noisy-neighbour"
    section = "noisy_neighbour"
    Settings = Settings
    headline = "lat_p99"
    uses_fleet = False
    flags = (Flag("--neighbours", ("noisy_neighbour.neighbours",)),
             Flag("--cap-iops", ("noisy_neighbour.cap_iops",)),
             Flag("--runtime", ("noisy_neighbour.victim.runtime_s",)),
             Flag("--backend", ("disk.backend",), f"The backend of the experiment's fleet {CONFIG_BACKEND}."),
             full_flag("noisy_neighbour"))

    def declared(self, cfg: Config) -> DeclaredBlock[tuple[int, int]]:
        """Each neighbour count (the victim and n busy VMs) on the host and in the VMs, and capped in
        the VMs (with neighbours, and a cap asked for); each declared point is (neighbours, cap)."""
        c = cfg.noisy_neighbour
        seconds = fio.tool_seconds(c.victim) + 2 * (LEAD_S + fio.START_MARGIN_S)
        points = []
        for n in c.neighbours:
            points.append(Declared(f"n{n}", (n, 0), seconds, 1 + n))
            if n and c.cap_iops:
                points.append(Declared(f"n{n}-capped", (n, c.cap_iops), seconds, 1 + n, envs=(VIRTUAL,)))
        return DeclaredBlock(f"backend {cfg.disk.backend}", tuple(points))

    def plan(self, cfg: Config) -> Plan:
        return plan_of(self.name, [self.declared(cfg)], cfg.repeat.count)

    def points(self, ctx: RunContext, record: TestbedRecord, can_cap: bool) -> list[Point]:
        c = ctx.cfg.noisy_neighbour
        backend, victim = record.disk["backend"], record.vms[0]
        meta_of_heavy = {f"neighbour_{k}": v for k, v in fio.job_meta(c.neighbour).items() if k in ("rw", "bs", "iodepth")}

        def at(d: Declared[tuple[int, int]], env: str) -> Point | None:
            n, cap = d.what
            if cap and not can_cap:
                return None
            others = record.vms[1:1 + n]
            host_victim = partial(fio.on_host, ctx.host, c.victim, device=record.device_path,
                                  slots=[(victim.slice_offset, victim.slice_bytes)])

            def host_heavy(job):
                return fio.on_host(ctx.host, job, device=record.device_path,
                                   slots=[(vm.slice_offset, vm.slice_bytes) for vm in others])

            def guest_heavy(job):
                return fio.in_guests(record.uri, job, others)

            def in_vms():
                with iotune.capped(record.uri, disks(others), cap) if others and can_cap else contextlib.nullcontext():
                    return with_neighbours(partial(fio.in_guests, record.uri, c.victim, [victim]), guest_heavy, c,
                                           GuestAgent.__name__, n)
            guest = (backend, tuple(vm.name for vm in [victim, *others]), in_vms)
            return sweep.point_in(
                env, f"n{n}", partial(with_neighbours, host_victim, host_heavy, c, type(ctx.host).__name__, n), guest,
                ids=(f"n{n}/physical", f"n{n}/virtual-capped" if cap else f"n{n}/virtual"), parse=fio.parse,
                headline=self.headline, meta={"point": d.label, "neighbours": n, "cap_iops": cap, "vm_count": 1 + n,
                                              **fio.job_meta(c.victim), **meta_of_heavy})
        return self.declared(ctx.cfg).made(at)

    def measures(self, ctx: RunContext) -> sweep.Sweep:
        c = ctx.cfg.noisy_neighbour
        sweep_cfg = sweep.fleet_config(ctx.cfg, "nn", vms=1 + max(c.neighbours))
        planned = {"neighbours": c.neighbours, "cap_iops": c.cap_iops}
        skipped: dict[str, str] = {}

        def points(record: TestbedRecord, _tb) -> list[Point]:
            why = cap_refusal(record) if c.cap_iops and any(c.neighbours) else None
            if why:
                step(f"capped points skipped: {why}")
                skipped["capped points"] = why
                ctx.store.update_manifest(skipped=skipped)
            return self.points(ctx, record, can_cap=why is None)
        block = sweep.SweepBlock(f"backend {ctx.cfg.disk.backend}",
                                 fleet=sweep.Fleet(sweep_cfg), points=points)
        return sweep.Sweep(sweep_cfg, [block], "the noisy-neighbour fleet", planned, skipped)

    def summarize(self, ctx: RunContext) -> None:
        rows = neighbour_rows(ctx.store.samples)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        table = Table(title=f"noisy-neighbour: the victim's QD1 latency, µs (mean ± 95% CI over repeats; accel={accel}"
                            f"{tcg_caveat(accel)})")
        for col in ("neighbours", "where", "p50", "p99", "p99 against alone (95% CI, p)"):
            table.add_column(col, justify="left" if col == "where" else "right")
        for r in rows:
            table.add_row(str(r["neighbours"]), r["where"], r["p50"], r["p99"], r["against_alone"])
        text = tables.render([table], [(f, e) for f, e in failed(ctx.store.samples)])
        write_atomic(ctx.store.dir / "summary.txt", text)


def _values(samples: list[Sample], key: tuple, metric: str) -> list[float]:
    return [s.value for s in samples if _key(s) == key and s.metric == metric and s.status == "ok"
            and isinstance(s.metadata.get("repeat"), int) and s.value is not None]


def _key(s: Sample) -> tuple:
    """(neighbours, env, capped) of a sample's point."""
    return s.metadata.get("neighbours"), s.metadata.get("env"), bool(s.metadata.get("cap_iops"))


def neighbour_rows(samples: list[Sample]) -> list[dict]:
    """Per neighbour count and place: the victim's p50 and p99, and its p99 against the same place
    with no neighbours (the ratio, its 95% CI and p), where both were measured with spread."""
    mine = [s for s in samples if s.metadata.get("experiment") == NoisyNeighbour.name and "neighbours" in s.metadata]
    rows = []
    for key in sorted({_key(s) for s in mine}, key=lambda k: (k[0], k[1] == VIRTUAL, k[2])):
        n, env, cap = key
        p50, p99 = _values(mine, key, "lat_p50"), _values(mine, key, "lat_p99")
        if not p99:
            continue
        d = difference(_values(mine, (0, env, False), "lat_p99"), p99) if n else None
        where = "host" if env == PHYSICAL else "VM, neighbours capped" if cap else "VM"
        rows.append({"neighbours": n, "where": where, "p50": summarize(p50).format(0) if p50 else "-",
                     "p99": summarize(p99).format(0),
                     "against_alone": f"{d.ratio:.2f}x ({d.low:.2f}-{d.high:.2f}), {p_text(d.p_value)}" if d else "-"})
    return rows


def failed(samples: list[Sample]) -> list[tuple[str, str]]:
    return sorted({(s.metadata.get("point_id", ""), s.error) for s in samples
                   if s.metadata.get("experiment") == NoisyNeighbour.name and s.status == "failed"})


EXPERIMENT = NoisyNeighbour()
