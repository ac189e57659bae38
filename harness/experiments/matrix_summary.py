"""The fio matrix's summary: one row per point with the host and every backend side by side,
the table (with the best backend, named only when significant) and the bar plot."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.table import Table

from harness import backends
from harness.analysis.stats import ranked_tests
from harness.report import plots, tables
from harness.report.plots import plt
from harness.report.verdict import said
from harness.results.environment import tcg_caveat
from harness.results.metrics import LOWER, direction
from harness.results.samples import Sample, participant_sample, summed_points

# a summed point's figures, in the columns of a single participant's
AS_ONE = {"aggregate_iops": "iops", "aggregate_bw": "bw"}


def matrix_rows(samples: list[Sample], group: str) -> list[dict]:
    """One row per point label of a group: {label, results: {<backend>: {metric: value}}, errors},
    with the noisy flag of every metric."""
    rows: dict[str, dict] = {}
    unquiet: dict[tuple[str, str], dict] = {}   # (point, backend) -> repeat -> why it was not clean
    threshold = 0.10
    summed = summed_points(s.row() for s in samples)
    for s in samples:
        m = s.metadata
        if m.get("group") != group or participant_sample(m, summed):
            continue
        s = dataclasses.replace(s, metric=AS_ONE.get(s.metric, s.metric))
        row = rows.setdefault(m["point"], {"label": m["point"], "results": {}, "errors": [], "daemon_cpu": {}})
        if s.status == "ok" and tables.measured(s) and s.metric in ("iops", "lat_mean", "bw"):
            for label in DAEMON_CPU:   # the storage daemons' CPU over the point, % of one core
                if m.get(f"{label}_cpu_pct"):
                    row["daemon_cpu"].setdefault((m["backend"], label, m.get("host_cpus")), []).append(m[f"{label}_cpu_pct"])
        threshold = m.get("noisy_cv_threshold", threshold)
        if s.status != "ok":
            row["errors"].append(f"{m['backend']}: {s.error}")
            row["results"].setdefault(m["backend"], {})["failed"] = True
            continue
        row["results"].setdefault(m["backend"], {}).setdefault(s.metric, []).append(s.value)
        if tables.measured(s) and s.metric in ("iops", "lat_mean", "bw"):   # a repeat's reasons once
            unquiet.setdefault((m["point"], m["backend"]), {})[m.get("repeat")] = tables.unquiet_reasons(s.metadata)
    for row in rows.values():
        for backend, res in row["results"].items():
            for metric in ("iops", "lat_mean", "bw"):
                tables.flag_noisy(res, metric, [r for reasons in unquiet.get((row["label"], backend), {}).values()
                                                 for r in reasons], threshold)
            tables.means(res)
    return list(rows.values())


# label in the samples -> what it is: every backend's host-side daemons
DAEMON_CPU = {p.label: p.what or p.executable for p in backends.host_processes()}


def daemon_cpu_table(rows: list[dict], group: str) -> Table | None:
    """What each backend's storage daemon cost in CPU during the group's points (host points
    included: a polling reactor does not stop for them), against the host's CPUs."""
    seen: dict[tuple, list[float]] = {}
    for r in rows:
        for key, pcts in r.get("daemon_cpu", {}).items():
            seen.setdefault(key, []).extend(pcts)
    if not seen:
        return None
    table = Table(title=f"{group}: storage daemon CPU during the points",
                  caption="% of one core, mean over points; a polling reactor (SPDK without interrupt mode) takes its "
                          "core whether or not I/O flows, so on a small host it competes with the guests and host fio")
    for col in ("during", "daemon", "CPU (% of a core)", "of the host"):
        table.add_column(col, justify="left" if col in ("during", "daemon") else "right")
    for (backend, label, cpus), pcts in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        mean = sum(pcts) / len(pcts)
        share = f"{mean / int(cpus):.0f}% of {cpus} CPUs" if str(cpus or "").isdigit() else "-"
        during = "host points while it ran" if backend == "host" else f"{backend} points"
        table.add_row(during, DAEMON_CPU[label], f"{mean:.0f}%", share)
    return table


def best_backends(rows: list[dict], metric: str, alpha: float = 0.05) -> list[str]:
    """Each row's best backend by the metric's direction, against its runner-up: named only where
    Welch's t-test on log values says so, its p Holm-adjusted over the rows; otherwise a tie, with
    the largest difference the CI allows (or why no test could be made)."""
    if direction(metric) is None:   # a metric of unknown direction is not judged (as compare does not)
        return [f"not judged: {metric} has no declared direction (harness/results/metrics.py)"] * len(rows)
    families = [[(b, r.get(metric + tables.VALUES, [r[metric]])) for b, r in row["results"].items()
                 if b != "host" and r.get(metric) is not None] for row in rows]
    lower = direction(metric) is LOWER
    tests = ranked_tests(families, [lower] * len(rows))
    out = []
    for row, (ranked, diff, p) in zip(rows, tests):
        share = row["results"][ranked[0]].get("ve_pe_ratio") if ranked else None
        note = f" ({share:.2f}x bare metal)" if share is not None else ""
        out.append(said(ranked, diff, p, metric, note, alpha, lower=lower) if ranked else "-")
    return out


def best_backend(row: dict, metric: str, alpha: float = 0.05) -> str:
    """One row's verdict, tested alone."""
    return best_backends([row], metric, alpha)[0]


def print_matrix(rows: list[dict], group: str, metric: str, accel: str) -> str:
    """Host and every backend side by side on the group's headline metric, with VE/PE and the best
    backend (by the metric's direction)."""
    backends = sorted({b for r in rows for b in r["results"] if b != "host"})
    unit = {"lat_mean": "us", "iops": "IOPS", "bw": "KiB/s"}.get(metric, "")
    table = Table(title=f"{group}: {metric} ({unit}), accel={accel}"
                        f"{tcg_caveat(accel)}",
                  caption="mean ± 95% CI (CV) over shuffled repeats; (x) = VE/PE; IO/CPU-s = I/Os per CPU-second "
                          "of QEMU and storage daemons; best backend: against the runner-up, Welch's t-test on log "
                          f"values, p Holm-adjusted over the {len(rows)} point(s); else a tie, with the largest "
                          "difference its 95% CI allows")
    table.add_column("point")
    table.add_column("host", justify="right")
    for b in backends:
        table.add_column(f"{b} (VE/PE)", justify="right")
    table.add_column("best backend", justify="left")
    for r, best in zip(rows, best_backends(rows, metric)):
        res = r["results"]

        def cell(b, res=res):
            v = res.get(b, {})
            if v.get(metric) is None:
                return "failed" if v.get("failed") else "-"
            ratio = f" ({v['ve_pe_ratio']:.2f}x)" if v.get("ve_pe_ratio") is not None else ""
            eff = f", {v['ios_per_cpu_s']:,.0f} IO/CPU-s" if v.get("ios_per_cpu_s") is not None else ""
            noisy = tables.NOISY_MARK if v.get(metric + tables.NOISY) else ''
            return f"{tables.with_ci(v[metric], v.get(metric + tables.STATS), 1)}{ratio}{eff}{noisy}"
        table.add_row(r["label"], cell("host"), *[cell(b) for b in backends], best)
    shown = [table]
    if metric == "lat_mean":
        lat = Table(title=f"{group}: latency percentiles (us)")
        for col in ("point", "env", "mean", "p50", "p99", "p99.9"):
            lat.add_column(col, justify="right" if col not in ("point", "env") else "left")
        for r in rows:
            for b, v in sorted(r["results"].items()):
                if v.get("lat_mean") is not None:
                    lat.add_row(r["label"], b, *(f"{v[k]:,.1f}" for k in ("lat_mean", "lat_p50", "lat_p99", "lat_p999")))
        shown.append(lat)
    if cost := daemon_cpu_table(rows, group):
        shown.append(cost)
    notes = tables.noisy_notes([(f"{r['label']} {b}", v) for r in rows for b, v in r["results"].items()], metric)
    return tables.render(shown, [(r["label"], e) for r in rows for e in r["errors"]], notes=notes)


def backends_bars(rows: list[dict], path: Path, metric: str, title: str) -> Path:
    """Grouped bars: one group per point, one bar per environment (host first, then backends)."""
    envs = ["host"] + sorted({b for r in rows for b in r["results"] if b != "host"})
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(rows) * max(1, len(envs)) / 3), 4.5))
    width = 0.8 / len(envs)
    plotted = []
    for i, env in enumerate(envs):
        xs, ys, errs, noisy = [], [], [], []
        for x, r in enumerate(rows):
            res = r["results"].get(env, {})
            if res.get(metric) is not None:
                xs.append(x + (i - (len(envs) - 1) / 2) * width)
                ys.append(res[metric])
                errs.append(plots.ci(res, metric))
                noisy.append(bool(res.get(metric + tables.NOISY)))
        ax.bar(xs, ys, width, yerr=errs, capsize=3, label=env, color="black" if env == "host" else None,
               ecolor="gray")
        plots.mark_noisy(ax, xs, ys, noisy)
        plotted += ys
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["label"] for r in rows], fontsize=8)
    ax.set_ylabel({"lat_mean": "mean latency (us)", "iops": "IOPS", "bw": "bandwidth (KiB/s)"}.get(metric, metric))
    plots.log_if_spread(ax, plotted)
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    plots.title(ax, title)
    return plots.save(fig, path)
