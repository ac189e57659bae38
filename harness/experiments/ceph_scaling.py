"""`harness run ceph-scaling`: the SSD-cluster study's method on a real Ceph cluster, made here
(ceph.mode = "local": each storage node a network namespace) or over the [[hosts]] (ceph.mode =
"hosts": each host a storage node, over the hosts' own network).

One cluster with the largest node count is made (through the sweep's fleet on the rbd backend);
each node count k is the pool whose CRUSH rule spans nodes 1..k, so each block re-provisions only
the fleet's image and VMs. Per node count and link rate, every pattern x block size x client
processes (fio numjobs) runs from the host through librbd (PE) and in the VMs through QEMU's
librbd (VE); over [[hosts]], on every host at once (`vms` clients on each, whatever the node
count). Measured from the hosts only (`--pe-only`), no VM is made: each host client has its own
region of its host's image. Every point records each node link's use from its byte counters (the
namespaces' veths, or each host's interface on the cluster's network) and is flagged
network-bound when a link ran above 90% of its cap or of the speed its driver says.

The summary fits the study's regression model per node count (R², leave-one-out error), the
correlation of each factor with each metric per node count, and plots metric against node
count, against client processes, and predicted against measured."""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Annotated, Literal

from matplotlib.ticker import NullFormatter
from pydantic import Field
from rich.table import Table
from scipy import stats

from harness import hosts
from harness.analysis import model
from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import BlockSize, StudySection, bs_bytes, each
from harness.config.core import Config
from harness.experiments import Flag, RunContext, full_flag
from harness.fleet.multi_host import SpanningRecord, SweptOverHosts
from harness.fleet.testbed import Testbed, TestbedRecord, VmInfo
from harness.measure import aggregate, sweep
from harness.measure.declaration import Declared, DeclaredBlock, envs, plan_of
from harness.measure.pipeline import PHYSICAL, Point
from harness.measure.plan import Plan
from harness.report import plots, tables
from harness.report.plots import plt
from harness.resources.ceph import hosts as ceph_hosts
from harness.resources.ceph import local as ceph_local
from harness.resources.ceph.plan import MAX_NODES, CephConfig, hosts_mode_problem, osd_size_for, osd_size_problem
from harness.results.columns import B, I, N, S, column
from harness.results.environment import accel_label, tcg_caveat
from harness.workloads import fio

METRICS = {"aggregate_bw": "bandwidth (KiB/s)", "aggregate_iops": "IOPS", "lat_mean": "completion latency (us)"}
FACTORS = ("numjobs", "bs_bytes")


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("ceph-scaling", [
    column("ceph_nodes", I, "storage nodes"),
    column("link", S, "the links' cap (`uncapped`)"),
    column("bs_bytes", I, "the block size", "B"),
    column("link_n<K>_rx_mbit_s", N, "node K's link, received", "Mbit/s"),
    column("link_n<K>_tx_mbit_s", N, "node K's link, sent", "Mbit/s"),
    column("link_mbit", N, "the links' cap, or over [[hosts]] the slowest speed their NICs report (0: none)", "Mbit/s"),
    column("link_peak_utilisation", N, "the busiest link, as a share of its cap or reported speed", "fraction"),
    column("network_bound", B, "a link above 90% of its cap or reported speed"),
    column("link_window", S, "what the link figures cover: fio's measured window or the whole call"),
    column("link_window_s", N, "its length", "s"),
]),)


class Settings(StudySection):
    FULL = {"patterns": ["read", "write", "randread", "randwrite"]}
    node_counts: Annotated[list[int], each(lambda n: 1 <= n <= 5, "every node count must be 1 to 5")] = Field(
        [2, 3], min_length=1, description="storage node counts (1-5), each a pool on exactly those nodes of one cluster "
        "(on [[hosts]] with ceph.mode=\"hosts\", unless set: 1 up to the number of hosts)")
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["read", "randwrite"], min_length=1, description="fio access patterns (full: all four)")
    numjobs: Annotated[list[int], each(lambda n: 1 <= n <= 16, "every client process count must be 1 to 16")] = Field(
        [1, 4], min_length=1, description="client processes (fio numjobs), 1-16")
    bs: list[BlockSize] = Field(["4k", "128k"], min_length=1, description="block sizes")
    link_mbit: Annotated[list[int], each(lambda n: n >= 0, "every link rate must be 0 (uncapped) or more")] = Field(
        [0], min_length=1, description="node link rates in Mbit/s to sweep (0 = uncapped)")
    iodepth: int = Field(4, ge=1, le=256, description="queue depth per client process")
    vms: int = Field(1, ge=1, le=8, description="VMs (and host clients) per point, on each host over [[hosts]]; "
                     "their sum is the aggregate")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    size_mib: int = Field(128, ge=16, description="each VM's region of the image")
    ve: bool = Field(True, description="also measure in VMs (PE and VE side by side)")


def client_slots(vms: list[VmInfo], count: int, size: int) -> list[tuple[int, int]]:
    """Where the host's clients run on its image: the (offset, bytes) of each VM's slice, or with no
    VM (measured from the hosts only), `count` regions of `size` bytes."""
    return [(vm.slice_offset, vm.slice_bytes) for vm in vms] or [(i * size, size) for i in range(count)]


def block_name(nodes: int, rate: int) -> str:
    """A block's name in its points' ids: its node count and link rate."""
    return f"n{nodes}-{f'{rate}mbit' if rate else 'uncapped'}"


def block_label(nodes: int, rate: int) -> str:
    return f"{nodes} storage node(s), links {f'{rate} Mbit/s' if rate else 'uncapped'}"


def over_hosts(cfg: Config) -> bool:
    """The cluster is made over the [[hosts]], each a storage node."""
    return cfg.ceph.mode == "hosts"


def node_counts(cfg: Config) -> list[int]:
    """The node counts swept: the config's, or over [[hosts]] unless set, 1 up to the number of hosts."""
    c = cfg.ceph_scaling
    if over_hosts(cfg) and "node_counts" not in c.model_fields_set:
        return list(range(1, min(len(cfg.hosts), MAX_NODES) + 1))
    return sorted(set(c.node_counts))


def clients(cfg: Config) -> int:
    """The VMs (and host clients) of every point: ceph_scaling.vms, on each host over [[hosts]]."""
    return cfg.ceph_scaling.vms * (len(cfg.hosts) if over_hosts(cfg) else 1)


class CephScaling:
    question = "How a Ceph cluster's I/O scales with its nodes"
    uses_fleet = False
    spans_hosts = True   # over [[hosts]], every host is a storage node and a client
    name = "ceph-scaling"
    section = "ceph_scaling"
    Settings = Settings
    headline = "aggregate_bw"
    flags = (Flag("--nodes", ("ceph_scaling.node_counts",), "Comma-separated storage node counts, e.g. 2,3."),
             Flag("--runtime", ("ceph_scaling.runtime_s",)), Flag("--ramp", ("ceph_scaling.ramp_s",)),
             Flag("--pe-only", ("ceph_scaling.ve",), "Measure from the host only (no VMs).", switch=False),
             full_flag("ceph_scaling"))

    def jobs(self, cfg: Config) -> list[tuple[str, fio.FioJob]]:
        c = cfg.ceph_scaling
        return [(f"{rw}-{bs}-j{nj}", fio.FioJob(rw=rw, bs=bs, numjobs=nj, iodepth=c.iodepth, direct=True,
                                                 runtime_s=c.runtime_s, ramp_s=c.ramp_s))
                for rw in c.patterns for bs in c.bs for nj in c.numjobs]

    @staticmethod
    def _cluster(cfg: Config) -> tuple[CephConfig, dict[int, int]]:
        """The one cluster the sweep makes ([ceph] with the most nodes swept), and every block's image in it."""
        c, counts = cfg.ceph_scaling, node_counts(cfg)
        return (cfg.ceph.model_copy(update={"nodes": max(counts), "link_mbit": 0,   # links set per block
                                            "replicas": min(cfg.ceph.replicas, max(counts)),
                                            "pool_node_counts": counts}),
                {k: clients(cfg) * c.size_mib for k in counts})

    def configured(self, cfg: Config) -> Config:
        """The node counts that run, set (over [[hosts]] they default to the host count): the
        run's recorded config says what was swept."""
        return cfg.model_copy(update={"ceph_scaling": cfg.ceph_scaling.model_copy(
            update={"node_counts": node_counts(cfg)})})

    def refusal(self, cfg: Config) -> str | None:
        if cfg.ceph.mode == "existing":   # its pools and CRUSH rules per node count are made, not borrowed
            return ('ceph-scaling makes its own cluster, so ceph.mode="existing" does not fit it. Fix: --set '
                    'ceph.mode=local, or ceph.mode=hosts on [[hosts]] (your cluster serves `--backend rbd` runs)')
        if cfg.hosts and not over_hosts(cfg):
            return ('ceph-scaling on [[hosts]] makes its cluster over them. Fix: --set ceph.mode=hosts, or drop '
                    '[[hosts]] for a cluster of network namespaces on one machine')
        if over_hosts(cfg) and any(cfg.ceph_scaling.link_mbit):
            return ("ceph_scaling.link_mbit caps the storage nodes' links; over [[hosts]] those are your hosts' own "
                    "interfaces, which vtb does not change. Fix: --set 'ceph_scaling.link_mbit=[0]'")
        if over_hosts(cfg) and (most := max(node_counts(cfg))) > len(cfg.hosts):
            return (f"ceph_scaling.node_counts goes up to {most} storage nodes, one per [[hosts]] entry, and the "
                    f"config has {len(cfg.hosts)}. Fix: add [[hosts]] tables or lower the node counts")
        ceph, images = self._cluster(cfg)
        return hosts_mode_problem(ceph, cfg.hosts) or osd_size_problem(ceph, images)

    def blocks(self, cfg: Config) -> list[tuple[int, int]]:
        """(storage nodes, link Mbit/s) of each block."""
        return [(k, rate) for k in node_counts(cfg) for rate in cfg.ceph_scaling.link_mbit]

    def declared(self, cfg: Config, nodes: int, rate: int) -> DeclaredBlock[fio.FioJob]:
        """A block's jobs, each run by as many host clients as VMs, on the hosts and in the VMs
        unless measured from the hosts only."""
        return DeclaredBlock(block_label(nodes, rate), tuple(
            Declared(label, job, fio.tool_seconds(job), clients(cfg), envs(cfg.ceph_scaling.ve))
            for label, job in self.jobs(cfg)))

    def plan(self, cfg: Config) -> Plan:
        return plan_of(self.name, [self.declared(cfg, k, rate) for k, rate in self.blocks(cfg)], cfg.repeat.count)

    def measures(self, ctx: RunContext) -> sweep.Sweep:
        cfg, c = ctx.cfg, ctx.cfg.ceph_scaling
        ceph, images = self._cluster(cfg)
        spread = hosts.all_placed(cfg.placement) if over_hosts(cfg) else []
        # the sweep's VMs on each host: ceph_scaling.vms, whatever [[hosts]] vms the user's fleet has;
        # measured from the hosts only, none, and each host's image one region per host client
        vms_per_host = c.vms if c.ve else 0
        sweep_cfg = sweep.fleet_config(cfg, "cs", vms=clients(cfg) if c.ve else 0,
                                       disk_size_mib=c.size_mib * (1 if c.ve else c.vms)).model_copy(
            update={"disk": cfg.disk.with_backend("rbd"),
                    "ceph": ceph.model_copy(update={"osd_size_mib": osd_size_for(ceph, images)}),
                    "hosts": [h.model_copy(update={"vms": vms_per_host}) for h in cfg.hosts]})
        jobs = self.jobs(cfg)

        def fleet(k: int) -> sweep.Fleet:
            """Node count k's fleet: its VMs' disks in the pool over the first k nodes."""
            return sweep.Fleet(sweep_cfg.model_copy(update={"ceph": sweep_cfg.ceph.model_copy(update={"pool_nodes": k})}),
                               over=tuple(spread))

        def block(k: int, rate: int) -> sweep.SweepBlock:
            return sweep.SweepBlock(
                block_label(k, rate), fleet=fleet(k), rebuildable=not spread,
                ready=lambda tb: None if spread else ceph_local.set_link_rate(ctx.host, tb.store.plan, rate),
                points=lambda record, tb: self._points(ctx, tb, record, k, rate))
        return sweep.Sweep(
            sweep_cfg, [block(k, rate) for k, rate in self.blocks(cfg)], "the sweep fleet and its cluster",
            {"blocks": [block_name(k, rate) for k, rate in self.blocks(cfg)], "points": [label for label, _ in jobs]},
            standing=fleet(max(node_counts(cfg))))

    def _points(self, ctx: RunContext, tb: Testbed | SweptOverHosts, record: TestbedRecord | SpanningRecord,
                nodes: int, rate: int) -> list[Point]:
        """A block's points; over hosts, each host's link is found once for all of them."""
        if isinstance(record, SpanningRecord):
            observe = ceph_hosts.node_links(tb.store.plan)
        else:
            observe = partial(ceph_local.links_observed, tb.store.plan, nodes, rate)
        return self.declared(ctx.cfg, nodes, rate).made(
            lambda d, env: self._point(ctx, record, nodes, rate, d.label, d.what, env, observe))

    def _point(self, ctx: RunContext, record: TestbedRecord | SpanningRecord, nodes: int, rate: int, label: str,
               job: fio.FioJob, env: str, observe) -> Point:
        block = block_name(nodes, rate)
        meta = {"point": label, "block": block, "ceph_nodes": nodes, "link": f"{rate}mbit" if rate else "uncapped",
                **fio.job_meta(job), "bs_bytes": bs_bytes(job.bs)}
        common = dict(parse=fio.parse, aggregate=aggregate.aggregate, headline=self.headline, observe=observe)
        clients_per_host, size = ctx.cfg.ceph_scaling.vms, ctx.cfg.ceph_scaling.size_mib << 20
        if isinstance(record, SpanningRecord):   # every host's clients at once, each host's link observed
            groups = [(h, part, client_slots(part.vms, clients_per_host, size)) for h, part in zip(record.hosts, record.parts)]
            groups = [(h, part, slots) for h, part, slots in groups if slots]
            vms = tuple(vm.name for _, part, _ in groups for vm in part.vms)
            return sweep.point_in(
                env, f"{block}/{label}",
                partial(fio.across_hosts, job, slots=[(h, part.device_path, slots) for h, part, slots in groups]),
                ("rbd", vms, partial(fio.across_hosts, job, fleets=[(h, part.uri, part.vms) for h, part, _ in groups])),
                meta={**meta, "vm_count": sum(len(slots) for *_, slots in groups),
                      "placement": {h.name: len(slots) for h, _, slots in groups}}, **common)
        slots = client_slots(record.vms, clients_per_host, size)
        return sweep.point_in(
            env, f"{block}/{label}", partial(fio.on_host, ctx.host, job, device=record.device_path, slots=slots),
            ("rbd", tuple(vm.name for vm in record.vms), partial(fio.in_guests, record.uri, job, record.vms)),
            meta={**meta, "vm_count": len(slots)}, **common)

    # --- the summary ---------------------------------------------------------------------
    def summarize(self, ctx: RunContext) -> None:
        rows = [{**s.metadata, "metric": s.metric, "value": s.value, "status": s.status}
                for s in ctx.store.samples if "ceph_nodes" in s.metadata]
        points = point_rows(rows)
        if not points:
            return
        fits = fits_per_node_count(rows)
        corr = correlations(points)
        accel = accel_label(ctx.environment)
        accel += tcg_caveat(accel)
        text = print_summary(points, fits, corr, accel)
        write_atomic(ctx.store.dir / "summary.txt", text)
        for png in (by_nodes_plot(points, ctx.store.dir / "ceph-scaling-nodes.png"),
                    by_clients_plot(points, ctx.store.dir / "ceph-scaling-clients.png"),
                    predicted_plot(rows, fits, ctx.store.dir / "ceph-scaling-predicted.png")):
            if png:
                step(f"plot: {png}")


def point_rows(rows: list[dict]) -> list[dict]:
    """One row per (block, point, env): the means over repeats of each metric, the peak link use,
    and whether any repeat was network-bound."""
    out: dict[tuple, dict] = {}
    for r in rows:
        if r.get("scope") != "aggregate" or r.get("repeat") == "all":
            continue
        key = (r["ceph_nodes"], r["link"], r["point"], r["env"])
        row = out.setdefault(key, {"nodes": r["ceph_nodes"], "link": r["link"], "point": r["point"], "env": r["env"],
                                   "rw": r["rw"], "bs": r["bs"], "bs_bytes": r["bs_bytes"], "numjobs": r["numjobs"],
                                   "network_bound": False, "link_peak": None, "failed": False, "links": {}})
        if r["status"] != "ok":
            row["failed"] = True
            continue
        if r["metric"] in METRICS:
            row.setdefault(r["metric"], []).append(r["value"])
        if r["metric"] == "aggregate_bw":   # once per repeat
            for key in r:   # each node link's busier direction (over [[hosts]]: each host's interface)
                if (m := re.fullmatch(r"link_n(\d+)_rx_mbit_s", key)) and r[key] is not None:
                    busier = max(r[key], r.get(f"link_n{m[1]}_tx_mbit_s") or 0.0)
                    row["links"].setdefault(int(m[1]), []).append(busier)
            row["network_bound"] |= bool(r.get("network_bound"))
            if r.get("link_peak_utilisation") is not None:
                row["link_peak"] = max(row["link_peak"] or 0.0, r["link_peak_utilisation"])
    return [tables.means(r) for r in sorted(out.values(), key=lambda r: (r["nodes"], r["link"], r["point"], r["env"]))]


def fits_per_node_count(rows: list[dict]) -> dict[tuple[int, str], model.Model | str]:
    """The study's regression model of each metric per node count (a reason where it cannot be fitted)."""
    fits: dict[tuple[int, str], model.Model | str] = {}
    for nodes in sorted({r["ceph_nodes"] for r in rows}):
        mine = [r for r in rows if r["ceph_nodes"] == nodes]
        for metric in METRICS:
            try:
                fits[(nodes, metric)] = model.fit(mine, metric)
            except ValueError as e:
                fits[(nodes, metric)] = str(e)
    return fits


def correlations(points: list[dict]) -> list[dict]:
    """Pearson's r (and its p-value) of each numeric factor with each metric, per node count and
    environment, over the points' means; None where a factor or metric does not vary."""
    out = []
    for nodes in sorted({p["nodes"] for p in points}):
        for env in sorted({p["env"] for p in points}):
            mine = [p for p in points if p["nodes"] == nodes and p["env"] == env]
            for factor in FACTORS:
                for metric in METRICS:
                    pairs = [(p[factor], p[metric]) for p in mine if p.get(metric) is not None]
                    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
                    if len(pairs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
                        r = p_value = None
                    else:
                        res = stats.pearsonr(xs, ys)
                        r, p_value = float(res.statistic), float(res.pvalue)
                    out.append({"nodes": nodes, "env": env, "factor": factor, "metric": metric, "r": r, "p": p_value,
                                "n": len(pairs)})
    return out


def print_summary(points: list[dict], fits: dict, corr: list[dict], accel: str) -> str:
    t = Table(title=f"ceph-scaling: means over repeats, accel={accel}")
    for col in ("nodes", "link", "point", "env", "MiB/s", "IOPS", "lat us", "node links Mbit/s", "link peak", "net-bound"):
        t.add_column(col, justify="left" if col in ("link", "point", "env", "node links Mbit/s") else "right", no_wrap=True)
    for p in points:
        t.add_row(str(p["nodes"]), p["link"], p["point"], p["env"],
                  "failed" if p.get("aggregate_bw") is None else f"{p['aggregate_bw'] / 1024:,.1f}",
                  tables.cell(p, "aggregate_iops"), tables.cell(p, "lat_mean"), links_cell(p["links"]),
                  "-" if p["link_peak"] is None else f"{p['link_peak']:.0%}", "yes" if p["network_bound"] else "")
    m = Table(title="regression per node count: log(metric) ~ log(numeric factors) + categorical factors")
    for col in ("nodes", "metric", "factors", "R²", "held-out error"):
        m.add_column(col, justify="right" if col in ("R²", "held-out error") else "left")
    for (nodes, metric), fit in fits.items():
        if isinstance(fit, str):
            m.add_row(str(nodes), metric, fit, "-", "-")
        else:
            m.add_row(str(nodes), metric, ", ".join(fit.numeric + list(fit.levels)), f"{fit.r2:.3f}",
                      "-" if fit.loo_mape is None else f"{fit.loo_mape:.1%}")
    c = Table(title="correlation of each factor with each metric (Pearson r over the points' means)")
    for col in ("nodes", "env", "factor", "metric", "r", "p", "n"):
        c.add_column(col, justify="right" if col in ("r", "p", "n") else "left")
    for row in corr:
        c.add_row(str(row["nodes"]), row["env"], row["factor"], row["metric"],
                  "-" if row["r"] is None else f"{row['r']:+.2f}", "-" if row["p"] is None else f"{row['p']:.3f}",
                  str(row["n"]))
    failures = [(f"n{p['nodes']} {p['point']} {p['env']}", "failed") for p in points if p["failed"]]
    return tables.render([t, m, c], failures, width=120)


def links_cell(links: dict[int, list[float]]) -> str:
    """Each node link's busier direction, the mean over repeats: "n1 120, n2 35"."""
    return ", ".join(f"n{k} {sum(v) / len(v):,.0f}" for k, v in sorted(links.items())) or "-"


def _grid(points: list[dict], x_key: str, path: Path, title: str, xlabel: str) -> Path | None:
    patterns = list(dict.fromkeys(p["rw"] for p in points))
    if not patterns:
        return None
    fig, axes = plt.subplots(1, len(patterns), figsize=(max(6, 3.4 * len(patterns)), 3.8), squeeze=False)
    for ax, rw in zip(axes[0], patterns):
        series: dict[tuple, list] = {}
        for p in points:
            if p["rw"] == rw and p.get("aggregate_bw") is not None:
                series.setdefault((p["env"], p["bs"], p["numjobs"] if x_key == "nodes" else p["nodes"]), []).append(p)
        for (env, bs, other), ps in sorted(series.items()):
            ps.sort(key=lambda p: p[x_key])
            label = f"{'PE' if env == PHYSICAL else 'VE'} {bs} " + (f"j{other}" if x_key == "nodes" else f"{other} nodes")
            ax.plot([p[x_key] for p in ps], [p["aggregate_bw"] / 1024 for p in ps], marker="o",
                    ls="-" if env == PHYSICAL else "--", label=label)
            bound = [p for p in ps if p["network_bound"]]
            ax.scatter([p[x_key] for p in bound], [p["aggregate_bw"] / 1024 for p in bound], s=120,
                       facecolors="none", edgecolors="red", label=None)
        ax.set_xticks(sorted({p[x_key] for p in points}))
        ax.set_ylim(bottom=0)   # a zoomed axis would make noise look like scaling
        ax.set_title(rw, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bandwidth (MiB/s)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title + " (red ring: network-bound)", fontsize=9)
    return plots.save(fig, path)


def by_nodes_plot(points: list[dict], path: Path) -> Path | None:
    return _grid(points, "nodes", path, "ceph-scaling: bandwidth against storage node count", "storage nodes")


def by_clients_plot(points: list[dict], path: Path) -> Path | None:
    return _grid(points, "numjobs", path, "ceph-scaling: bandwidth against client processes", "client processes")


def predicted_plot(rows: list[dict], fits: dict, path: Path) -> Path | None:
    """Each measured point against its model's prediction, per metric (on the diagonal = predicted)."""
    panels = [(metric, [(nodes, f) for (nodes, mt), f in fits.items() if mt == metric and not isinstance(f, str)])
              for metric in METRICS]
    panels = [(metric, fs) for metric, fs in panels if fs]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.8), squeeze=False)
    for ax, (metric, fs) in zip(axes[0], panels):
        for nodes, fit in fs:
            obs = model.observations([r for r in rows if r["ceph_nodes"] == nodes], metric)
            ax.scatter([o["y"] for o in obs], [fit.predict(o) for o in obs], s=14, label=f"{nodes} nodes")
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], color="gray", lw=1, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):   # a narrow log range labels its minor ticks, over each other
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"measured {METRICS[metric]}", fontsize=8)
        ax.set_ylabel("predicted", fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("ceph-scaling: the regression model per node count, predicted against measured", fontsize=9)
    return plots.save(fig, path)


EXPERIMENT = CephScaling()
