"""`harness report RUN [RUN...] [--prefer iops|latency|efficiency]`: one self-contained HTML page
(styles inline, plots embedded), from the jinja2 template beside it. Per run: the verdict first
(each workload's backends ranked against bare metal, a winner only where the statistics allow, a
recommendation under the stated priority), then the physical-vs-virtual table, the summary's own
tables, every plot, failures and skipped items, the environment and the full config."""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from harness.analysis.stats import noisy_reason, summarize
from harness.report import ratio_plot, tables, verdict
from harness.results.samples import read_rows


def _natural(key: tuple) -> list:
    """Sorts point names as people read them: n2 before n10 (points run in shuffled order)."""
    return [[int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(part))] for part in key]


def _headline_key(row: dict, headlines: dict[str, str]) -> tuple | None:
    """The row's place in the PE/VE table: only repeats of the headline metric its point declared
    (rows recorded before samples carried it: the one its experiment, or group, declares now)."""
    exp = row.get("experiment")
    metric = row.get("headline") or headlines.get(row.get("group") or exp or "")
    if row.get("status") != "ok" or row.get("metric") != metric or row.get("repeat") == "all":
        return None
    if row.get("scope") != "aggregate" and row.get("group") is None:
        return None
    where = row.get("backend", "") if row["env"] == "virtual" else "host"
    # a sweep's block (a node count, a device) names the point too, unless it is the backend (a column)
    block = "" if row.get("block") in (None, "", row.get("backend")) else str(row["block"])
    # a RAID sweep's array names the point too: each array's figures are its own, never pooled
    point = f"{row['setup']} {row['point']}" if row.get("setup") else row["point"]
    return (exp, row.get("group", "") or block, point, where, metric)


def pe_ve_table(rows: list[dict], headlines: dict[str, str]) -> dict:
    """The headline of every point, host and each backend side by side: {envs, rows}."""
    cells: dict[tuple, dict[str, dict]] = {}
    envs: list[str] = []
    for r in rows:
        k = _headline_key(r, headlines)
        if k is None:
            continue
        exp, group, point, where, metric = k
        point_key = (exp, group, point.replace("virtual-", "").replace("physical-", ""), metric)
        cell = cells.setdefault(point_key, {}).setdefault(where, {"values": [], "unquiet": [], "cv": 0.10})
        cell["values"].append(r["value"])
        cell["cv"] = r.get("noisy_cv_threshold", cell["cv"])
        cell["unquiet"] += tables.unquiet_reasons(r)
        if where not in envs:
            envs.append(where)
    envs = ["host"] + sorted(e for e in envs if e != "host")
    out = []
    for (exp, group, point, metric), by_env in sorted(cells.items(), key=lambda kv: _natural(kv[0])):
        host = summarize(by_env["host"]["values"]).mean if "host" in by_env else None
        shown = []
        for env in envs:
            if env not in by_env:
                shown.append(None)
                continue
            cell = by_env[env]
            st = summarize(cell["values"])
            shown.append({"text": st.format(), "ratio": f"{st.mean / host:.2f}x" if host and env != "host" else "",
                          "noisy": noisy_reason(cell["values"], cell["cv"], cell["unquiet"][:1])})
        out.append({"name": f"{exp} {group} {point}" if group and group != exp else f"{exp} {point}",
                    "metric": metric, "cells": shown})
    return {"envs": envs, "rows": out}


def _mean(values: list[float], digits: int = 1) -> str:
    return summarize(values).format(digits) if values else "-"


def verdict_view(rows: list[dict], prefer: str, headlines: dict[str, str]) -> dict:
    """The verdict's tables: per workload, its backends best first, with their share of bare metal."""
    found = verdict.workloads(rows, headlines)
    shown = []
    for w in found:
        entries = [{"backend": e.backend, "headline": _mean(e.values),
                    "share": (f"{e.of_host.ratio:.2f}x ({e.of_host.low:.2f}-{e.of_host.high:.2f})" if e.of_host else
                              f"{e.ratio:.2f}x (no CI)" if e.ratio is not None else "-"),
                    "p99": _mean(e.p99), "per_cpu": _mean(e.per_cpu, 0), "winner": w.winner[prefer] == e.backend}
                   for e in w.entries]
        shown.append({"name": w.name, "metric": w.metric, "better": w.better.value, "said": w.said[prefer],
                      "host": _mean(w.host), "entries": entries})
    picture = ratio_plot.png(found)
    return {"recommendation": verdict.recommendation(found, prefer), "workloads": shown,
            "noun": found[0].noun if found else "backend",
            "priority": verdict.PRIORITIES[prefer], "plot": base64.b64encode(picture).decode() if picture else None}


def run_view(run: Path, headlines: dict[str, str], prefer: str) -> dict:
    manifest = json.loads((run / "run.json").read_text())
    rows = read_rows(run / "samples.jsonl") if (run / "samples.jsonl").exists() else []
    retried = {(r.get("point_id"), r.get("repeat")): r for r in rows if r.get("retried_after")}
    summary = run / "summary.json"
    return {
        "id": manifest["run_id"], "experiment": manifest.get("experiment"), "status": manifest.get("status"),
        "environment": manifest.get("environment") or {},
        "verdict": verdict_view(rows, prefer, headlines), "pe_ve": pe_ve_table(rows, headlines),
        "failures": [r for r in rows if r.get("status") != "ok"],
        "retried": [(r.get("repeat"), pid, r["retried_after"].splitlines()[0]) for (pid, _), r in retried.items()],
        "skipped": manifest.get("skipped") or {},
        "blocks_failed": manifest.get("blocks_failed") or {},
        "summary": json.loads(summary.read_text()) if summary.exists() else None,
        "summary_text": (run / "summary.txt").read_text() if (run / "summary.txt").exists() else "",
        "plots": [{"name": png.name, "data": base64.b64encode(png.read_bytes()).decode()}
                  for png in sorted(run.glob("*.png"))],
        "config": json.dumps(manifest.get("config"), indent=2),
    }


def render(runs: list[Path], headlines: dict[str, str] | None = None, prefer: str = "iops") -> str:
    """The page; `headlines` ({experiment: its headline metric}) serves runs whose samples predate
    recording their headline; `prefer` is the priority the recommendation is made under."""
    env = Environment(loader=PackageLoader("harness.report", "templates"), autoescape=select_autoescape(["j2"]))
    return env.get_template("report.html.j2").render(
        title="vtb report: " + ", ".join(r.name for r in runs), prefer=prefer,
        runs=[run_view(r, headlines or {}, prefer) for r in runs])
