"""Summary tables from samples."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.analysis.stats import change_p_value, noisy_reason, smallest_p_value, summarize
from harness.console import console as shared

STATS = "#stats"  # row[key + STATS]: the Summary behind row[key] (a mean over repeats)
VALUES = "#values"  # row[key + VALUES]: the repeat values behind row[key]
NOISY = "#noisy"  # row[key + NOISY]: why the repeats behind row[key] are not to be trusted ("" = fine)
NOISY_MARK = " (noisy)"


def measured(s: Sample) -> bool:
    """A sample of one repeat (not a value derived over repeats, such as a VE/PE ratio)."""
    return s.metadata.get("repeat") != "all"


def _flag(d: dict, key: str, unquiet: list[str], threshold: float) -> None:
    """Sets d[key + NOISY] from the repeat values in d[key] (call before _means)."""
    if isinstance(d.get(key), list):
        d[key + NOISY] = noisy_reason(d[key], threshold, unquiet)


def unquiet_of(s: Sample) -> list[str]:
    return [] if s.metadata.get("host_quiet", True) else [s.metadata.get("quiet_reason") or "host busy"]


def _means(d: dict) -> dict:
    """Replaces every list of repeat values in d by its mean, keeping the Summary beside it."""
    for key, value in list(d.items()):
        if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            st = summarize(value)
            d[key], d[key + STATS], d[key + VALUES] = st.mean, st, value
    return d

from harness.samples import Sample


def vm_scaling_rows(samples: list[Sample]) -> list[dict]:
    """One row per VM count: physical and virtual aggregates side by side (None where failed),
    each a mean over repeats with its CI, and the noisy flag of the headline."""
    rows: dict[int, dict] = {}
    unquiet: dict[tuple, list[str]] = {}
    threshold = 0.10
    for s in samples:
        if s.metadata.get("scope") != "aggregate":
            continue
        row = rows.setdefault(s.metadata["vm_count"], {"vm_count": s.metadata["vm_count"], "errors": []})
        env = s.metadata["env"]
        threshold = s.metadata.get("noisy_cv_threshold", threshold)
        if s.status != "ok":
            row["errors"].append(f"{env}: {s.error}")
            row[f"{env}_failed"] = True
            continue
        row.setdefault(f"{env}_{s.metric}", []).append(s.value)
        if s.metric == "aggregate_iops":
            unquiet.setdefault((row["vm_count"], env), []).extend(unquiet_of(s))
    for (n, env), reasons in unquiet.items():
        _flag(rows[n], f"{env}_aggregate_iops", reasons, threshold)
    return [_means(rows[n]) for n in sorted(rows)]


def _render(tables: list[Table], failures: list[tuple[str, str]], width: int = 100,
            notes: list[tuple[str, str]] = ()) -> str:
    """Prints the tables, the noisy points and the failures under them; returns the same as plain text."""
    console = Console(record=True, highlight=False, width=max(shared.width, width))
    for t in tables:
        console.print(t)
    _render_notes(console, list(notes))
    for what, error in failures:
        console.print(Text(f"{what} failed", style="red").append(f": {error}"))
    return console.export_text()


def _cell(row: dict, key: str, digits: int = 0) -> str:
    """A number; 'failed' where the point failed; '-' where it was not measured (e.g. interrupted).
    A noisy point is marked."""
    if row.get(key) is not None:
        return _with_ci(row[key], row.get(key + STATS), digits) + (NOISY_MARK if row.get(key + NOISY) else "")
    return "failed" if row.get(f"{key.split('_')[0]}_failed") else "-"


def _noisy_notes(named: list[tuple[str, dict]], metric: str = "") -> list[tuple[str, str]]:
    """(what, why) for every noisy value (of `metric`, or any) in the named dicts, printed under the table."""
    return [(f"{name} {key.removesuffix(NOISY)}", why) for name, d in named for key, why in d.items()
            if key.endswith(NOISY) and why and key.removesuffix(NOISY).endswith(metric)]


def _render_notes(console: Console, notes: list[tuple[str, str]]) -> None:
    for what, why in notes:
        console.print(Text("noisy ", style="yellow").append(f"{what}: {why}"))


def _with_ci(mean: float, st, digits: int) -> str:
    """The mean, with its CI and CV when it is a mean over repeats."""
    return st.format(digits) if st is not None else f"{mean:,.{digits}f}"


def print_vm_scaling(rows: list[dict], accel: str) -> str:
    """Prints the summary and returns it as plain text (kept in the run folder)."""
    table = Table(title=f"vm-scaling (accel={accel}{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    for col in ("VMs", "phys IOPS", "virt IOPS", "virt IOPS/VM", "virt lat mean us", "p50 us", "p99 us",
                "virt/phys"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["vm_count"]), _cell(r, "physical_aggregate_iops"), _cell(r, "virtual_aggregate_iops"),
                      _cell(r, "virtual_iops_per_vm"), _cell(r, "virtual_lat_mean", 1),
                      _cell(r, "virtual_lat_p50", 1), _cell(r, "virtual_lat_p99", 1),
                      _cell(r, "virtual_ve_pe_ratio", 3))
    table.caption = "mean ± 95% CI (CV) over shuffled repeats; (noisy): see below"
    return _render([table], [(f"{r['vm_count']} VM point", e) for r in rows for e in r["errors"]],
                   notes=_noisy_notes([(f"{r['vm_count']} VM", r) for r in rows]))


def matrix_rows(samples: list[Sample], group: str) -> list[dict]:
    """One row per point label of a group: {label, results: {<backend>: {metric: value}}, errors},
    with the noisy flag of every metric."""
    rows: dict[str, dict] = {}
    unquiet: dict[tuple[str, str], list[str]] = {}
    threshold = 0.10
    for s in samples:
        m = s.metadata
        if m.get("group") != group:
            continue
        row = rows.setdefault(m["point"], {"label": m["point"], "results": {}, "errors": []})
        threshold = m.get("noisy_cv_threshold", threshold)
        if s.status != "ok":
            row["errors"].append(f"{m['backend']}: {s.error}")
            row["results"].setdefault(m["backend"], {})["failed"] = True
            continue
        row["results"].setdefault(m["backend"], {}).setdefault(s.metric, []).append(s.value)
        if measured(s) and s.metric in ("iops", "lat_mean", "bw"):
            unquiet.setdefault((m["point"], m["backend"]), []).extend(unquiet_of(s))
    for row in rows.values():
        for backend, res in row["results"].items():
            for metric in ("iops", "lat_mean", "bw"):
                _flag(res, metric, unquiet.get((row["label"], backend), [])[:1], threshold)
            _means(res)
    return list(rows.values())


def best_backend(row: dict, metric: str, lower_is_better: bool, alpha: float = 0.05) -> str:
    """The backend with the best mean on this row, named only when it differs significantly from
    the runner-up (the permutation test `harness compare` uses); otherwise says why not."""
    cands = sorted(((b, r) for b, r in row["results"].items() if b != "host" and r.get(metric) is not None),
                   key=lambda c: c[1][metric], reverse=not lower_is_better)
    if not cands:
        return "-"
    best, res = cands[0]
    ratio = f" ({res['ve_pe_ratio']:.2f}x bare metal)" if res.get("ve_pe_ratio") is not None else ""
    if len(cands) == 1:
        return f"{best}{ratio}, the only one measured"
    runner_up = cands[1]
    a, b = res.get(metric + VALUES, [res[metric]]), runner_up[1].get(metric + VALUES, [runner_up[1][metric]])
    p = change_p_value(a, b)
    if p is None:
        return "no test: one repeat (set repeat.count >= 4)"
    if smallest_p_value(len(a), len(b)) >= alpha:
        return (f"no test possible: {len(a)} and {len(b)} repeats cannot reach p < {alpha:g} "
                f"(set repeat.count >= 4); best mean {best}")
    if p >= alpha:
        return f"no significant difference ({best} vs {runner_up[0]}: p={p:.2f})"
    return f"{best}{ratio}, p={p:.3f} vs {runner_up[0]}"


def print_matrix(rows: list[dict], group: str, metric: str, lower_is_better: bool, accel: str) -> str:
    """Host and every backend side by side on the group's headline metric (its direction as the
    experiment declares it), with VE/PE and the best backend."""
    backends = sorted({b for r in rows for b in r["results"] if b != "host"})
    unit = {"lat_mean": "us", "iops": "IOPS", "bw": "KiB/s"}.get(metric, "")
    table = Table(title=f"{group}: {metric} ({unit}), accel={accel}"
                        f"{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''}",
                  caption="mean ± 95% CI (CV) over shuffled repeats; (x) = VE/PE; IO/CPU-s = I/Os per CPU-second "
                          "of QEMU and storage daemons")
    table.add_column("point")
    table.add_column("host", justify="right")
    for b in backends:
        table.add_column(f"{b} (VE/PE)", justify="right")
    table.add_column("best backend", justify="left")
    for r in rows:
        res = r["results"]

        def cell(b):
            v = res.get(b, {})
            if v.get(metric) is None:
                return "failed" if v.get("failed") else "-"
            ratio = f" ({v['ve_pe_ratio']:.2f}x)" if v.get("ve_pe_ratio") is not None else ""
            eff = f", {v['ios_per_cpu_s']:,.0f} IO/CPU-s" if v.get("ios_per_cpu_s") is not None else ""
            return f"{_with_ci(v[metric], v.get(metric + STATS), 1)}{ratio}{eff}{NOISY_MARK if v.get(metric + NOISY) else ''}"
        table.add_row(r["label"], cell("host"), *[cell(b) for b in backends], best_backend(r, metric, lower_is_better))
    tables = [table]
    if metric.startswith("lat"):
        lat = Table(title=f"{group}: latency percentiles (us)")
        for col in ("point", "env", "mean", "p50", "p99", "p99.9"):
            lat.add_column(col, justify="right" if col not in ("point", "env") else "left")
        for r in rows:
            for b, v in sorted(r["results"].items()):
                if v.get("lat_mean") is not None:
                    lat.add_row(r["label"], b, *(f"{v[k]:,.1f}" for k in ("lat_mean", "lat_p50", "lat_p99", "lat_p999")))
        tables.append(lat)
    notes = _noisy_notes([(f"{r['label']} {b}", v) for r in rows for b, v in r["results"].items()], metric)
    return _render(tables, [(r["label"], e) for r in rows for e in r["errors"]], notes=notes)


MYSQL_AXIS_KEYS = {"tests": "db_test", "threads": "db_threads", "page_sizes": "db_page_size",
                   "buffer_pool_fractions": "db_buffer_pool_fraction", "compression": "db_key_block_size",
                   "vm_counts": "vm_count"}


def mysql_rows(samples: list[Sample]) -> list[dict]:
    """One row per point: physical and virtual aggregates side by side, with the axis values."""
    rows: dict[str, dict] = {}
    for s in samples:
        m = s.metadata
        if m.get("experiment") != "mysql" or m.get("scope") != "aggregate":
            continue
        row = rows.setdefault(m["point"], {"point": m["point"], "axis": m["axis"], "errors": [],
                                           **{axis: m[key] for axis, key in MYSQL_AXIS_KEYS.items()}})
        if s.status != "ok":
            row["errors"].append(f"{m['env']}: {s.error}")
            row[f"{m['env']}_failed"] = True
            continue
        row.setdefault(f"{m['env']}_{s.metric}", []).append(s.value)
    return [_means(r) for r in rows.values()]


def print_mysql(rows: list[dict], accel: str) -> str:
    table = Table(title=f"mysql: sysbench aggregate TPS, physical against virtual (accel={accel}"
                        f"{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    for col in ("point", "axis", "VMs", "phys TPS", "virt TPS", "virt/phys", "phys p95 ms", "virt p95 ms"):
        table.add_column(col, justify="left" if col in ("point", "axis") else "right")
    for r in rows:
        table.add_row(r["point"], r["axis"], str(r["vm_counts"]), _cell(r, "physical_aggregate_tps", 1),
                      _cell(r, "virtual_aggregate_tps", 1), _cell(r, "virtual_ve_pe_ratio", 3),
                      _cell(r, "physical_lat_p95", 2), _cell(r, "virtual_lat_p95", 2))
    return _render([table], [(r["point"], e) for r in rows for e in r["errors"]])


def curve_points(samples: list[Sample], group: str) -> dict[str, list[tuple[float, float]]]:
    """Per environment (host or backend): (achieved IOPS, mean latency) of each throttled point,
    in increasing rate order, averaged over repeats."""
    acc: dict[str, dict[str, dict[str, list]]] = {}
    order: dict[str, int] = {}
    for s in samples:
        m = s.metadata
        if m.get("group") != group or s.status != "ok" or m.get("rate_iops", 0) == 0:
            continue
        point = acc.setdefault(m["backend"], {}).setdefault(m["point"], {"iops": [], "lat_mean": []})
        order.setdefault(m["point"], m["rate_iops"])
        if s.metric in point:
            point[s.metric].append(s.value)
    return {env: [(summarize(p["iops"]).mean, summarize(p["lat_mean"]).mean)
                  for _, p in sorted(points.items(), key=lambda kv: order[kv[0]]) if p["iops"] and p["lat_mean"]]
            for env, points in acc.items()}


def print_curves(found: dict, threshold_pct: float, accel: str) -> str:
    table = Table(title=f"latency-curve (accel={accel}{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    for col in ("env", "bound IOPS", "base lat us", f"knee (lat +{threshold_pct:g}%) IOPS", "IOPS at 95% bound",
                "lat there us", "increase"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for env, f in sorted(found.items(), key=lambda kv: kv[0] != "host"):
        table.add_row(env, f"{f.bound_iops:,.0f}", f"{f.base_lat:,.1f}",
                      "-" if f.knee_iops is None else f"{f.knee_iops:,.0f}", f"{f.iops_at_95:,.0f}",
                      f"{f.lat_at_95:,.1f}", f"{f.increase_at_95:+.0%}")
    return _render([table], [])


def values_of(samples: list[Sample], group: str, metric: str) -> dict[tuple[str, str], list[float]]:
    """(backend or host, point) -> the metric's values over repeats, for one group."""
    out: dict[tuple[str, str], list[float]] = {}
    for s in samples:
        if s.metadata.get("group") == group and s.metric == metric and s.status == "ok":
            out.setdefault((s.metadata["backend"], s.metadata["point"]), []).append(s.value)
    return out


def print_layers(per_backend: dict[str, dict[str, float]], accel: str) -> str:
    table = Table(title=f"latency by layer, us and share of the backend's total (accel={accel}"
                        f"{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    layers = list(next(iter(per_backend.values())))
    table.add_column("layer", justify="left")
    for b in per_backend:
        table.add_column(b, justify="right")
    for layer in layers:
        table.add_row(layer, *(f"{v[layer]:,.1f} ({v[layer] / sum(v.values()):.0%})" for v in per_backend.values()))
    table.add_row("total", *(f"{sum(v.values()):,.1f}" for v in per_backend.values()))
    return _render([table], [])


def raid_rows(samples: list[Sample]) -> list[dict]:
    """One row per (array setup, point): PE and VE bandwidth with the RAID model's expectation,
    measured/expected and the stack overhead (means over repeats)."""
    rows: dict[tuple, dict] = {}
    for s in samples:
        m = s.metadata
        if "setup" not in m:
            continue
        row = rows.setdefault((m["setup"], m["point"]), {"setup": m["setup"], "point": m["point"], "errors": []})
        if s.status != "ok":
            row["errors"].append(f"{m['env']}: {s.error}")
            row[f"{m['env']}_failed"] = True
            continue
        if s.metric in ("bw", "expected_bw", "measured_expected", "stack_overhead"):
            row.setdefault(f"{m['env']}_{s.metric}", []).append(s.value)
    return [_means(r) for r in rows.values()]


def print_raid(rows: list[dict], title: str, accel: str) -> str:
    table = Table(title=f"{title}: bandwidth (MiB/s), measured against the RAID model, accel={accel}")
    for col in ("array", "point", "PE", "PE expected", "PE meas/exp", "PE overhead",
                "VE", "VE expected", "VE meas/exp", "VE overhead", "VE/PE"):
        table.add_column(col, justify="left" if col in ("array", "point") else "right", no_wrap=True)

    def mib(r, key):
        return "-" if r.get(key) is None else f"{r[key] / 1024:,.1f}"

    def ratio(r, key, pct=False):
        return "-" if r.get(key) is None else (f"{r[key]:+.0%}" if pct else f"{r[key]:.2f}")
    for r in rows:
        ve_pe = (f"{r['virtual_bw'] / r['physical_bw']:.2f}" if r.get("virtual_bw") and r.get("physical_bw") else "-")
        table.add_row(r["setup"], r["point"],
                      _cell(r, "physical_bw", 0) if r.get("physical_bw") is None else mib(r, "physical_bw"),
                      mib(r, "physical_expected_bw"), ratio(r, "physical_measured_expected"),
                      ratio(r, "physical_stack_overhead", pct=True).lstrip("+"),
                      _cell(r, "virtual_bw", 0) if r.get("virtual_bw") is None else mib(r, "virtual_bw"),
                      mib(r, "virtual_expected_bw"), ratio(r, "virtual_measured_expected"),
                      ratio(r, "virtual_stack_overhead", pct=True).lstrip("+"), ve_pe)
    return _render([table], [(f"{r['setup']} {r['point']}", e) for r in rows for e in r["errors"]], width=150)
