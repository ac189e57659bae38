"""vm-scaling: the same fio job in 1..N VMs at once on one host device, against host fio on the
same device at the same total concurrency. How does aggregate IOPS scale with the VM count?

On a fleet that spans hosts ([[hosts]]), the first N VMs of the fleet (placed round-robin) run
together on all their hosts, and the physical baseline runs on each host, on that host's device,
with as many host slots as that host has VMs in the point. The aggregate is the sum; the summary
also shows each host's share."""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field
from rich.table import Table

from harness.common.console import step
from harness.common.files import write_atomic
from harness.config.core import Config
from harness.config.schema import Section, VmCounts
from harness.experiments import Flag, RunContext
from harness.measure import aggregate
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Point, Site
from harness.measure.plan import Block, Plan, PlannedPoint
from harness.report import plots, tables
from harness.report.plots import plt
from harness.results.environment import accel_label, tcg_caveat
from harness.results.samples import Sample
from harness.workloads import fio, fio_jobfile


class Settings(Section):
    vm_counts: Annotated[VmCounts, AfterValidator(lambda v: sorted(set(v)))] = Field(
        [1, 2, 4], min_length=1, description="VM counts to sweep; the fleet grows to the largest")
    job: fio.FioJob = fio.FioJob()
    job_file: Path | None = Field(None, description="your fio job file instead of `job` (vtb sets only its target; "
                                                    "each job and direction is a point of its own)")
    profile: str | None = Field(None, description="a shipped profile (profiles/fio/) instead of `job`")


class VmScaling:
    uses_fleet = True
    name = "vm-scaling"
    section = "vm_scaling"
    Settings = Settings
    headline = "aggregate_iops"
    spans_hosts = True
    flags = (Flag("--vm-counts", ("vm_scaling.vm_counts",), "Comma-separated VM counts, e.g. 1,2,4."),
             *(Flag(f"--{option}", (f"vm_scaling.job.{field}",)) for option, field in (
                 ("runtime", "runtime_s"), ("ramp", "ramp_s"), ("iodepth", "iodepth"), ("bs", "bs"), ("rw", "rw"),
                 ("numjobs", "numjobs"), ("ioengine", "ioengine"))),
             Flag("--job", ("vm_scaling.job_file",), "Your fio job file instead of vtb's job (--runtime and --ramp "
                                                      "apply to it)."),
             Flag("--profile", ("vm_scaling.profile",), "A shipped profile (profiles/fio/*.fio) instead of vtb's job."),
             Flag("--backend", ("disk.backend",), "Disk backend; the fleet is re-provisioned when it differs."))

    # what of vtb's own job applies to a job file (each job's runtime and ramp, over the file's, when
    # set); its other fields are vtb's job's only: the file says its own
    OVER_FILE = {"runtime_s": "runtime", "ramp_s": "ramp_time"}

    def fleet_size(self, cfg: Config) -> int:
        """The fleet this experiment needs: it grows to the largest VM count."""
        return max(cfg.vm_scaling.vm_counts)

    def workload(self, cfg: Config) -> fio.FioJob | fio.JobFile:
        """vtb's own job, or the user's job file (or profile), checked against a VM's slice."""
        c = cfg.vm_scaling
        if c.job_file is None and c.profile is None:
            return c.job
        overrides = {key: str(getattr(c.job, field)) for field, key in self.OVER_FILE.items()
                     if field in c.job.model_fields_set}
        return fio_jobfile.chosen(c.job_file, c.profile, cfg.fleet.disk_size_mib << 20, overrides=overrides)

    def refusal(self, cfg: Config) -> str | None:
        c = cfg.vm_scaling
        if c.job_file is None and c.profile is None:
            return None
        if c.job_file is not None and c.profile is not None:
            return ("vm-scaling runs a job file or a profile, not both (vm_scaling.job_file, vm_scaling.profile). "
                    "Fix: drop --job or --profile")
        if cfg.disk.backend == "rbd":
            return fio_jobfile.ON_RBD
        return fio_jobfile.refusal(lambda: self.workload(cfg))

    def _common(self, job: fio.FioJob | fio.JobFile, n: int) -> dict:
        """How a point of this job is read: one figure per VM, or each job and direction apart,
        named for the VM count (n2/<job>/<direction>: never pooled with another count's)."""
        parse = fio.parse if isinstance(job, fio.FioJob) else partial(fio.parse_jobs, prefix=f"n{n}/")
        return dict(parse=parse, aggregate=aggregate.aggregate, headline=self.headline)

    def points(self, ctx: RunContext) -> list[Point]:
        if len(ctx.testbeds) > 1:
            return self.points_across_hosts(ctx)
        job, tb = self.workload(ctx.cfg), ctx.testbed
        job_meta = fio.job_meta(job)
        points = []
        for n in ctx.cfg.vm_scaling.vm_counts:
            vms = tb.vms[:n]
            common = self._common(job, n)
            points.append(Point(f"physical-n{n}", PHYSICAL, "host", (), **common,
                                meta={"point": f"physical-n{n}", "vm_count": n, **job_meta},
                                run=partial(fio.on_host, ctx.host, job, device=tb.device_path,
                                            slots=[(vm.slice_offset, vm.slice_bytes) for vm in vms])))
            points.append(Point(f"virtual-n{n}", VIRTUAL, tb.disk["backend"], tuple(vm.name for vm in vms), **common,
                                meta={"point": f"virtual-n{n}", **job_meta}, baseline=f"physical-n{n}",
                                run=partial(fio.in_guests, tb.uri, job, vms)))
        return points

    def points_across_hosts(self, ctx: RunContext) -> list[Point]:
        """Each VM count over the hosts: the fleet's first n VMs, and the same slots on each host."""
        job = self.workload(ctx.cfg)
        job_meta = fio.job_meta(job)
        fleet = sorted(((vm, host, tb) for host, tb in zip(ctx.hosts, ctx.testbeds) for vm in tb.vms),
                       key=lambda x: x[0].index)
        points = []
        for n in ctx.cfg.vm_scaling.vm_counts:
            common = self._common(job, n)
            chosen = fleet[:n]
            groups = [(host, tb, [vm for vm, h, _ in chosen if h is host]) for host, tb in zip(ctx.hosts, ctx.testbeds)]
            groups = [g for g in groups if g[2]]
            placement = {host.name: len(vms) for host, _, vms in groups}
            slots = [(host, tb.device_path, [(vm.slice_offset, vm.slice_bytes) for vm in vms]) for host, tb, vms in groups]
            fleets = [(host, tb.uri, vms) for host, tb, vms in groups]
            points.append(Point(f"physical-n{n}", PHYSICAL, "host", (), **common,
                                meta={"point": f"physical-n{n}", "vm_count": n, "placement": placement, **job_meta},
                                run=partial(fio.across_hosts, job, slots=slots)))
            points.append(Point(f"virtual-n{n}", VIRTUAL, ctx.testbed.disk["backend"],
                                tuple(vm.name for vm, _, _ in chosen), **common,
                                meta={"point": f"virtual-n{n}", "placement": placement, **job_meta},
                                baseline=f"physical-n{n}", run=partial(fio.across_hosts, job, fleets=fleets)))
        return points

    def plan(self, cfg: Config) -> Plan:
        """One block, the fleet: each VM count on the host and in the VMs."""
        seconds = fio.tool_seconds(self.workload(cfg))
        return Plan(self.name, [Block(f"the fleet ({cfg.disk.backend})", [
            PlannedPoint(f"{env}-n{n}", env, seconds, n) for n in cfg.vm_scaling.vm_counts for env in (PHYSICAL, VIRTUAL)])],
            cfg.repeat.count)

    def run(self, ctx: RunContext) -> None:
        points = self.points(ctx)
        ctx.store.update_manifest(planned=[p.id for p in points])
        ctx.plan(len(points) * ctx.cfg.repeat.count)
        sites = [Site(h, tb.uri) for h, tb in zip(ctx.hosts, ctx.testbeds)] if len(ctx.testbeds) > 1 else None
        pipeline = ctx.pipeline(ctx.testbed.uri, (ctx.testbed.prefix + "-",), sites=sites)
        meta = ctx.testbed.metadata()
        if sites:  # the whole fleet, and each host's device
            meta.update(fleet_vms=sum(len(tb.vms) for tb in ctx.testbeds),
                        device=",".join(f"{h.name}:{tb.device_path}" for h, tb in zip(ctx.hosts, ctx.testbeds)))
        # a fleet over [[hosts]] is a MultiHostFleet's parts: not rebuilt as one testbed
        pipeline.measure(points, meta, rebuild=None if ctx.cfg.hosts else ctx.rebuilt_fleet)

    def summarize(self, ctx: RunContext) -> None:
        rows = vm_scaling_rows(ctx.store.samples)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        job = self.workload(ctx.cfg)
        what = f"{job.rw} {job.bs} QD{job.iodepth}" if isinstance(job, fio.FioJob) else job.source
        png = plot(rows, ctx.store.dir / "vm-scaling.png",
                   title=f"vm-scaling: {what}, {ctx.testbed.disk['backend']}, accel={accel}{tcg_caveat(accel)}; "
                         "mean ± 95% CI")
        text = print_vm_scaling(rows, accel=accel)
        if per_host := per_host_rows(ctx.store.samples):
            text += print_per_host(per_host)
        write_atomic(ctx.store.dir / "summary.txt", text)
        step(f"plot: {png}")


# --- its summary: rows over repeats, the table, the plot --------------------
def facet(meta: dict) -> str:
    """A job file's job and direction the sample is of ("" for vtb's own job), without the VM
    count its point is named for: a row per count, a curve per facet."""
    return re.sub(r"^n\d+/", "", meta.get("point", "")) if "#" in meta.get("point_id", "") else ""


def vm_scaling_rows(samples: list[Sample]) -> list[dict]:
    """One row per VM count (and per job and direction of a job file): physical and virtual
    aggregates side by side (None where failed), each a mean over repeats with its CI, and the
    noisy flag of the headline."""
    rows: dict[tuple[str, int], dict] = {}
    unquiet: dict[tuple, list[str]] = {}
    threshold = 0.10
    for s in samples:
        if s.metadata.get("scope") != "aggregate":
            continue
        key = (facet(s.metadata), s.metadata["vm_count"])
        row = rows.setdefault(key, {"facet": key[0], "vm_count": key[1], "errors": []})
        env = s.metadata["env"]
        threshold = s.metadata.get("noisy_cv_threshold", threshold)
        if s.status != "ok":
            row["errors"].append(f"{env}: {s.error}")
            row[f"{env}_failed"] = True
            continue
        row.setdefault(f"{env}_{s.metric}", []).append(s.value)
        if s.metric == "aggregate_iops":
            unquiet.setdefault((key, env), []).extend(tables.unquiet_reasons(s.metadata))
    for (key, env), reasons in unquiet.items():
        tables.flag_noisy(rows[key], f"{env}_aggregate_iops", reasons, threshold)
    order = list(dict.fromkeys(f for f, _ in rows))   # the file's order of jobs and directions
    return [tables.means(rows[k]) for k in sorted(rows, key=lambda k: (order.index(k[0]), k[1]))]


def per_host_rows(samples: list[Sample]) -> list[dict]:
    """One row per (VM count, host) when the fleet spans hosts: each host's IOPS (the sum over its
    VMs or host slots in a repeat), physical and virtual, as means over repeats."""
    hosts = {s.metadata.get("host") for s in samples if s.metadata.get("scope") in ("vm", "slot")}
    if len(hosts - {None}) < 2:
        return []
    sums: dict[tuple, dict] = {}
    for s in samples:
        m = s.metadata
        if m.get("scope") in ("vm", "slot") and s.metric == "iops" and s.status == "ok":
            key = (facet(m), m["vm_count"] if m["env"] == "virtual" else m.get("vm_count"), m["host"])
            per_repeat = sums.setdefault(key, {}).setdefault(m["env"], {})
            per_repeat[m["repeat"]] = per_repeat.get(m["repeat"], 0.0) + s.value
    rows = []
    for (job, n, host), by_env in sorted(sums.items()):
        rows.append(tables.means({"facet": job, "vm_count": n, "host": host,
                                  **{f"{env}_iops": list(v.values()) for env, v in by_env.items()}}))
    return rows


def _named(r: dict) -> list[str]:
    """A row's first cells: its job and direction when it has one, and its VM count."""
    return [r["facet"], str(r["vm_count"])] if r["facet"] else [str(r["vm_count"])]


def _columns(table: Table, rows: list[dict], cols: tuple[str, ...]) -> None:
    for col in (("job/direction",) if any(r["facet"] for r in rows) else ()) + cols:
        table.add_column(col, justify="left" if col == "job/direction" else "right")


def print_per_host(rows: list[dict]) -> str:
    table = Table(title="vm-scaling per host (each host's share of the aggregate)")
    _columns(table, rows, ("VMs", "host", "phys IOPS", "virt IOPS"))
    for r in rows:
        table.add_row(*_named(r), r["host"], tables.cell(r, "physical_iops"), tables.cell(r, "virtual_iops"))
    table.caption = "mean ± 95% CI over repeats; the host's VMs (or host slots) summed in each repeat"
    return tables.render([table], [])


def print_vm_scaling(rows: list[dict], accel: str) -> str:
    """Prints the summary and returns it as plain text (kept in the run folder)."""
    table = Table(title=f"vm-scaling (accel={accel}{tcg_caveat(accel)})")
    _columns(table, rows, ("VMs", "phys IOPS", "virt IOPS", "virt IOPS/VM", "virt lat mean us", "p50 us", "p99 us",
                           "virt/phys"))
    for r in rows:
        table.add_row(*_named(r), tables.cell(r, "physical_aggregate_iops"),
                      tables.cell(r, "virtual_aggregate_iops"), tables.cell(r, "virtual_iops_per_vm"),
                      tables.cell(r, "virtual_lat_mean", 1), tables.cell(r, "virtual_lat_p50", 1),
                      tables.cell(r, "virtual_lat_p99", 1), tables.cell(r, "virtual_ve_pe_ratio", 3))
    table.caption = "mean ± 95% CI (CV) over shuffled repeats; (noisy): see below"
    return tables.render([table], [(f"{_name(r)} point", e) for r in rows for e in r["errors"]],
                         notes=tables.noisy_notes([(_name(r), r) for r in rows]))


def _name(r: dict) -> str:
    return " ".join(filter(None, (r["facet"], f"{r['vm_count']} VM")))


def plot(rows: list[dict], path: Path, title: str) -> Path:
    """Aggregate and per-VM IOPS against VM count (mean ± 95% CI), with the physical baseline; a
    panel per job and direction of a job file."""
    facets = list(dict.fromkeys(r["facet"] for r in rows))
    fig, axes = plt.subplots(1, len(facets), figsize=(7 + 3.5 * (len(facets) - 1), 4.5), squeeze=False)
    for ax, name in zip(axes[0], facets):
        _panel(ax, [r for r in rows if r["facet"] == name], name)
    if len(facets) > 1:
        fig.suptitle(title, fontsize=9)
    else:
        plots.title(axes[0][0], title)
    return plots.save(fig, path)


def _panel(ax, rows: list[dict], name: str) -> None:
    def series(key: str, fmt: str, label: str):
        pts = [r for r in rows if r.get(key) is not None]
        xs, ys = [r["vm_count"] for r in pts], [r[key] for r in pts]
        ax.errorbar(xs, ys, yerr=[plots.ci(r, key) for r in pts], fmt=fmt, capsize=4, label=label)
        plots.mark_noisy(ax, xs, ys, [bool(r.get(key + tables.NOISY)) for r in pts])

    series("virtual_aggregate_iops", "o-", "virtual: aggregate IOPS")
    series("virtual_iops_per_vm", "s--", "virtual: mean IOPS per VM")
    series("physical_aggregate_iops", "k^-", "physical: host fio, same concurrency")
    for r in rows:
        if r.get("virtual_ve_pe_ratio") is not None:
            ax.annotate(f"{r['virtual_ve_pe_ratio']:.2f}x", (r["vm_count"], r["virtual_aggregate_iops"]),
                        textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel("VM count (host slots for physical)")
    ax.set_ylabel(f"IOPS, {name}" if name else "IOPS")
    ax.set_xticks(sorted({r["vm_count"] for r in rows}))
    if not plots.log_if_spread(ax, [r.get(k) for r in rows for k in ("virtual_aggregate_iops", "physical_aggregate_iops")]):
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


EXPERIMENT = VmScaling()
