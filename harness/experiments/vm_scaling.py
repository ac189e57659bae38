"""vm-scaling: the same fio job in 1..N VMs at once on one host device, against host fio on the
same device at the same total concurrency. How does aggregate IOPS scale with the VM count, and,
with several backends, which scales best?

One backend runs on the user's fleet. Several are one block each, on a fleet of the sweep's own
(vs-<fleet>, as large as the largest VM count) re-provisioned for each backend, each block with
the host's baseline measured in its own shuffled rounds; the user's fleet is left as it is.

On a fleet that spans hosts ([[hosts]]), the first N VMs of the fleet (placed round-robin) run
together on all their hosts, and the physical baseline runs on each host, on that host's device,
with as many host slots as that host has VMs in the point. The aggregate is the sum; the summary
also shows each host's share."""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Annotated, Callable

from pydantic import AfterValidator, Field
from rich.table import Table

from harness import backends
from harness.analysis import scaling
from harness.backends import BackendNames
from harness.common.console import console, step
from harness.common.files import write_atomic
from harness.common.schema import Section, VmCounts
from harness.config.core import Config
from harness.experiments import CONFIG_BACKEND, Flag, RunContext
from harness.fleet.multi_host import spanning_metadata
from harness.fleet.testbed import TestbedRecord
from harness.measure import aggregate, sweep
from harness.measure.declaration import BOTH, Declared, DeclaredBlock, plan_of
from harness.measure.pipeline import Point, Site
from harness.measure.plan import Plan
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
    backends: BackendNames = Field([], description="backends whose scaling curves are compared, each on a fleet "
                                                   "of its own; empty = disk.backend, on the user's fleet")


class VmScaling:
    question = "How aggregate IOPS scales with VMs, against bare metal"
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
                                                      "apply to it; default: none, vtb's job)."),
             Flag("--profile", ("vm_scaling.profile",), "A shipped profile (profiles/fio/*.fio) instead of vtb's job "
                                                              "(default: none)."),
             Flag("--backend", ("vm_scaling.backends",), "Comma-separated backends: one re-provisions the fleet "
                                                          "when it differs; several are compared, each on a fleet of its own "
                                                          f"{CONFIG_BACKEND}."))

    # what of vtb's own job applies to a job file (each job's runtime and ramp, over the file's, when
    # set); its other fields are vtb's job's only: the file says its own
    OVER_FILE = {"runtime_s": "runtime", "ramp_s": "ramp_time"}

    def configured(self, cfg: Config) -> Config:
        """One backend named is the user's fleet's (disk.backend)."""
        if len(cfg.vm_scaling.backends) == 1:
            return cfg.model_copy(update={"disk": cfg.disk.with_backend(cfg.vm_scaling.backends[0])})
        return cfg

    def needs_fleet(self, cfg: Config) -> bool:
        """A comparison brings up a fleet of its own for each backend: the user's is not touched."""
        return not self.compared(cfg)

    def compared(self, cfg: Config) -> list[str]:
        """The backends of a comparison (each a block of its own), or [] for the user's fleet alone."""
        return cfg.vm_scaling.backends if len(cfg.vm_scaling.backends) > 1 else []

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
        if self.compared(cfg) and cfg.hosts:
            return ("vm-scaling compares several backends on one host; the config's fleet is on [[hosts]]. "
                    "Fix: name one backend (--backend), or drop [[hosts]]")
        if c.job_file is None and c.profile is None:
            return None
        if c.job_file is not None and c.profile is not None:
            return ("vm-scaling runs a job file or a profile, not both (vm_scaling.job_file, vm_scaling.profile). "
                    "Fix: drop --job or --profile")
        if not all(backends.get(b).host_slices for b in self.compared(cfg) or [self.configured(cfg).disk.backend]):
            return fio_jobfile.ON_RBD
        return fio_jobfile.refusal(lambda: self.workload(cfg))

    def _common(self, job: fio.FioJob | fio.JobFile, n: int) -> dict:
        """How a point of this job is read: one figure per VM, or each job and direction apart,
        named for the VM count (n2/<job>/<direction>: never pooled with another count's)."""
        parse = fio.parse if isinstance(job, fio.FioJob) else partial(fio.parse_jobs, prefix=f"n{n}/")
        return dict(parse=parse, aggregate=aggregate.aggregate, headline=self.headline)

    def ids(self, n: int, block: str | None) -> tuple[str, str]:
        """A VM count's point ids: physical-n2 and virtual-n2, under the backend's name when several are compared."""
        return tuple(f"{block}/{env}-n{n}" if block else f"{env}-n{n}" for env in BOTH)

    def declared(self, cfg: Config, backend: str | None = None) -> DeclaredBlock[int]:
        """A block, the fleet or a backend compared: each VM count on the host and in the VMs."""
        seconds = fio.tool_seconds(self.workload(cfg))
        return DeclaredBlock(f"backend {backend}" if backend else f"the fleet ({cfg.disk.backend})",
                             tuple(Declared(f"n{n}", n, seconds, n) for n in cfg.vm_scaling.vm_counts))

    def plan(self, cfg: Config) -> Plan:
        return plan_of(self.name, [self.declared(cfg, b) for b in self.compared(cfg) or [None]], cfg.repeat.count)

    def _point(self, ctx: RunContext, n: int, env: str, block: str | None, host: Callable, guest: sweep.Guest,
               **meta) -> Point:
        """A VM count's point in one environment; compared, a VM count is one workload whose host
        baseline is measured in each backend's block (as the fio matrix's points are), named alike
        in every block."""
        job = self.workload(ctx.cfg)
        within = {"group": self.name, "block": block} if block else {}
        return sweep.point_in(env, "", host, guest, self.ids(n, block), **self._common(job, n), meta={
            "point": f"{env}-n{n}", "vm_count": n, **within, **meta, **fio.job_meta(job)})

    def points(self, ctx: RunContext, record: TestbedRecord, block: str | None = None) -> list[Point]:
        """Each VM count on the host (its slots of the device) and in the fleet's first VMs."""
        job, backend = self.workload(ctx.cfg), record.disk["backend"]

        def at(d: Declared[int], env: str) -> Point:
            vms = record.vms[:d.what]
            return self._point(ctx, d.what, env, block,
                               partial(fio.on_host, ctx.host, job, device=record.device_path,
                                       slots=[(vm.slice_offset, vm.slice_bytes) for vm in vms]),
                               (backend, tuple(vm.name for vm in vms), partial(fio.in_guests, record.uri, job, vms)))
        return self.declared(ctx.cfg, block).made(at)

    def points_across_hosts(self, ctx: RunContext) -> list[Point]:
        """Each VM count over the hosts: the fleet's first n VMs, and the same slots on each host."""
        job, backend = self.workload(ctx.cfg), ctx.testbed.disk["backend"]
        fleet = sorted(((vm, host, tb) for host, tb in zip(ctx.hosts, ctx.testbeds) for vm in tb.vms),
                       key=lambda x: x[0].index)

        def at(d: Declared[int], env: str) -> Point:
            chosen = fleet[:d.what]
            groups = [(host, tb, [vm for vm, h, _ in chosen if h is host]) for host, tb in zip(ctx.hosts, ctx.testbeds)]
            groups = [g for g in groups if g[2]]
            slots = [(host, tb.device_path, [(vm.slice_offset, vm.slice_bytes) for vm in vms]) for host, tb, vms in groups]
            return self._point(ctx, d.what, env, None, partial(fio.across_hosts, job, slots=slots),
                               (backend, tuple(vm.name for vm, _, _ in chosen),
                                partial(fio.across_hosts, job, fleets=[(host, tb.uri, vms) for host, tb, vms in groups])),
                               placement={host.name: len(vms) for host, _, vms in groups})
        return self.declared(ctx.cfg).made(at)

    def measures(self, ctx: RunContext) -> sweep.Sweep | sweep.OnFleet:
        if backends := self.compared(ctx.cfg):
            return self.compared_sweep(ctx, backends)
        if len(ctx.testbeds) <= 1:
            return sweep.OnFleet(self.points(ctx, ctx.testbed), {"vm_counts": ctx.cfg.vm_scaling.vm_counts})
        return sweep.OnFleet(self.points_across_hosts(ctx), {"vm_counts": ctx.cfg.vm_scaling.vm_counts},
                             sites=[Site(h, tb.uri) for h, tb in zip(ctx.hosts, ctx.testbeds)],
                             meta=spanning_metadata(ctx.hosts, ctx.testbeds))

    def compared_sweep(self, ctx: RunContext, backends: list[str]) -> sweep.Sweep:
        """A block per backend on the sweep's own fleet, re-provisioned for each; a backend this host
        cannot serve is skipped with why."""
        sweep_cfg = sweep.fleet_config(ctx.cfg, "vs", vms=self.fleet_size(ctx.cfg))
        skipped = {f"backend {b}": why for b, why in sweep.verdicts(ctx.host, sweep_cfg, backends).items() if why}
        runnable = [b for b in backends if f"backend {b}" not in skipped]
        blocks = [sweep.SweepBlock(f"backend {b}", fleet=sweep.Fleet(sweep_cfg, backend=b),
                                   points=lambda record, _tb, b=b: self.points(ctx, record, b)) for b in runnable]
        return sweep.Sweep(sweep_cfg, blocks, "the vm-scaling fleet",
                           {"backends": runnable, "vm_counts": ctx.cfg.vm_scaling.vm_counts}, skipped)

    def summarize(self, ctx: RunContext) -> None:
        rows = vm_scaling_rows(ctx.store.samples)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        job = self.workload(ctx.cfg)
        what = f"{job.rw} {job.bs} QD{job.iodepth}" if isinstance(job, fio.FioJob) else job.source
        served = ", ".join(dict.fromkeys(r["block"] for r in rows if r["block"])) or \
            (ctx.testbed.disk["backend"] if ctx.testbed else ctx.cfg.disk.backend)
        png = plot(rows, ctx.store.dir / "vm-scaling.png",
                   title=f"vm-scaling: {what}, {served}, accel={accel}{tcg_caveat(accel)}; mean ± 95% CI")
        text = print_vm_scaling(rows, accel=accel) + print_scaling(rows)
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
    rows: dict[tuple[str, str, int], dict] = {}
    unquiet: dict[tuple, list[str]] = {}
    threshold = 0.10
    for s in samples:
        if s.metadata.get("scope") != "aggregate":
            continue
        key = (s.metadata.get("block", ""), facet(s.metadata), s.metadata["vm_count"])
        row = rows.setdefault(key, {"block": key[0], "facet": key[1], "vm_count": key[2], "errors": []})
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
    blocks = list(dict.fromkeys(b for b, _, _ in rows))   # the run's order of backends
    order = list(dict.fromkeys(f for _, f, _ in rows))    # the file's order of jobs and directions
    return [tables.means(rows[k]) for k in sorted(rows, key=lambda k: (order.index(k[1]), blocks.index(k[0]), k[2]))]


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
    """A row's first cells: its job and direction and its backend when it has them, and its VM count."""
    return [c for c in (r["facet"], r.get("block", "")) if c] + [str(r["vm_count"])]


def _columns(table: Table, rows: list[dict], cols: tuple[str, ...]) -> None:
    named = (("job/direction",) if any(r["facet"] for r in rows) else ()) + \
        (("backend",) if any(r.get("block") for r in rows) else ())
    for col in named + cols:
        table.add_column(col, justify="left" if col in named else "right")


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
    return " ".join(filter(None, (r["facet"], r.get("block", ""), f"{r['vm_count']} VM")))


def curves(rows: list[dict]) -> dict[tuple[str, str], list[scaling.Step]]:
    """Each (job and direction, backend) curve's steps, from the rows' repeat values."""
    out: dict[tuple[str, str], tuple[dict, dict]] = {}
    for r in rows:
        virtual, physical = out.setdefault((r["facet"], r["block"]), ({}, {}))
        virtual[r["vm_count"]] = r.get("virtual_aggregate_iops" + tables.VALUES, [])
        physical[r["vm_count"]] = r.get("physical_aggregate_iops" + tables.VALUES, [])
    return {k: scaling.curve(v, p) for k, (v, p) in out.items()}


def _ratio(d) -> str:
    return f"{d.ratio:.2f} ({d.low:.2f}-{d.high:.2f})" if d is not None else "-"


def print_scaling(rows: list[dict]) -> str:
    """The scaling verdict: per curve and VM count, the efficiency and the share of bare metal with
    their CIs and where the curve stops rising; with several backends, which scales best at each
    count, named only where the test allows."""
    found = curves(rows)
    said = [f"{_curve_name(job, block)}: {scaling.knee_text(steps)}" for (job, block), steps in found.items()]
    said += _best_backends(rows, found)
    tables.record_text("scaling verdict", said, verdict=True)
    text = tables.render([_scaling_table(found)], [])
    for line in said:
        console.print(line, highlight=False)
    return text + "\n".join(said) + "\n"


def _scaling_table(found: dict[tuple[str, str], list[scaling.Step]]) -> Table:
    table = Table(title="vm-scaling: how the aggregate scales")
    named = [c for c, used in (("job/direction", any(f for f, _ in found)), ("backend", any(b for _, b in found))) if used]
    for col in (*named, "VMs", "efficiency (95% CI)", "of bare metal (95% CI)", "gain over previous"):
        table.add_column(col, justify="left" if col in named else "right")
    for (job, block), steps in found.items():
        first = ([job] if "job/direction" in named else []) + ([block] if "backend" in named else [])
        for st in steps:
            table.add_row(*first, str(st.vm_count), _ratio(st.efficiency), _ratio(st.share), st.gain_text())
    table.caption = ("efficiency: the aggregate at N VMs over N x the 1-VM aggregate (1 = linear); of bare metal: "
                     "the VMs' aggregate over host fio at the same concurrency; gains Holm-adjusted along each curve")
    return table


def _best_backends(rows: list[dict], found: dict[tuple[str, str], list[scaling.Step]]) -> list[str]:
    """Per job and direction measured on several backends: the best at each VM count, where the test allows."""
    said = []
    for job in dict.fromkeys(j for j, _ in found):
        by_backend = {b: {r["vm_count"]: r.get("virtual_aggregate_iops" + tables.VALUES, []) for r in rows
                          if r["facet"] == job and r["block"] == b} for j, b in found if j == job}
        if len(by_backend) > 1:
            said += [f"{job + ': ' if job else ''}{best.text()}" for best in scaling.best_by_count(by_backend)]
    return said


def _curve_name(job: str, block: str) -> str:
    return " ".join(filter(None, (job, block))) or "the curve"


def plot(rows: list[dict], path: Path, title: str) -> Path:
    """Per job and direction (one for vtb's own job): aggregate IOPS against VM count, each
    backend's curve beside the host's at the same concurrency (mean ± 95% CI), and beside it each
    backend's scaling efficiency per count (with its CI; 1 = linear)."""
    facets = list(dict.fromkeys(r["facet"] for r in rows))
    found = curves(rows)
    fig, axes = plt.subplots(len(facets), 2, figsize=(12, 4.5 * len(facets)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for (left, right), name in zip(axes, facets):
        mine = [r for r in rows if r["facet"] == name]
        _curves_panel(left, mine, name)
        _efficiency_panel(right, {b: steps for (f, b), steps in found.items() if f == name})
    if len(facets) > 1:
        fig.suptitle(title, fontsize=9)
    else:
        plots.title(axes[0][0], title)
    return plots.save(fig, path)


def _curves_panel(ax, rows: list[dict], name: str) -> None:
    blocks = list(dict.fromkeys(r["block"] for r in rows))
    several = len(blocks) > 1

    def series(pts: list[dict], key: str, fmt: str, label: str, **style):
        pts = [r for r in pts if r.get(key) is not None]
        xs, ys = [r["vm_count"] for r in pts], [r[key] for r in pts]
        ax.errorbar(xs, ys, yerr=[plots.ci(r, key) for r in pts], fmt=fmt, capsize=4, label=label, **style)
        plots.mark_noisy(ax, xs, ys, [bool(r.get(key + tables.NOISY)) for r in pts])

    for i, block in enumerate(blocks):
        mine = [r for r in rows if r["block"] == block]
        color = f"C{i}"
        series(mine, "virtual_aggregate_iops", "o-", f"{block or 'virtual'}: aggregate IOPS", color=color)
        if not several:
            series(mine, "virtual_iops_per_vm", "s--", "virtual: mean IOPS per VM", color="C1")
        series(mine, "physical_aggregate_iops", "^:" if several else "k^-",
               f"host, in {block}'s rounds" if several else "physical: host fio, same concurrency",
               **({"color": color, "alpha": 0.6} if several else {}))
        for r in mine:
            if r.get("virtual_ve_pe_ratio") is not None:
                ax.annotate(f"{r['virtual_ve_pe_ratio']:.2f}x", (r["vm_count"], r["virtual_aggregate_iops"]),
                            textcoords="offset points", xytext=(6, 6), fontsize=8, color=color)
    ax.set_xlabel("VM count (host slots for physical)")
    ax.set_ylabel(f"IOPS, {name}" if name else "IOPS")
    ax.set_xticks(sorted({r["vm_count"] for r in rows}))
    if not plots.log_if_spread(ax, [r.get(k) for r in rows for k in ("virtual_aggregate_iops", "physical_aggregate_iops")]):
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def _efficiency_panel(ax, by_block: dict[str, list[scaling.Step]]) -> None:
    shown = False
    for i, (block, steps) in enumerate(by_block.items()):
        pts = [st for st in steps if st.efficiency is not None]
        if not pts:
            continue
        shown = True
        ys = [st.efficiency.ratio for st in pts]
        err = [[y - st.efficiency.low for y, st in zip(ys, pts)], [st.efficiency.high - y for y, st in zip(ys, pts)]]
        ax.errorbar([st.vm_count for st in pts], ys, yerr=err, fmt="o-", capsize=4, color=f"C{i}",
                    label=block or "virtual")
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xticks(sorted({st.vm_count for steps in by_block.values() for st in steps}))
    ax.set_xlabel("VM count")
    ax.set_ylabel("scaling efficiency (aggregate / N x 1-VM)")
    ax.set_title("efficiency, 95% CI" if shown else "efficiency: needs a 1-VM count and 2+ repeats", fontsize=9)
    if shown:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


EXPERIMENT = VmScaling()
