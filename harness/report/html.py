"""`harness report RUN [RUN...]`: one self-contained HTML page (styles inline, plots embedded) with,
per run: the physical-vs-virtual comparison on top, the summary tables, every plot, failures and
skipped items with their reasons, the environment and the full config."""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from harness.analysis.stats import noisy_reason, summarize
from harness.report import tables

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}
pre{background:#f8f8f8;padding:1em;overflow-x:auto;font-size:.8em}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.noisy{color:#b00;font-weight:bold;font-size:.8em}.fail{color:#b00}
.warn{background:#fff4e5;border-left:4px solid #f90;padding:.5em 1em}"""

# Marks the page once every plot has decoded, and reports a broken one on the console.
CHECK = """window.addEventListener('load',function(){var imgs=document.images,ok=true;
for(var i=0;i<imgs.length;i++){if(!imgs[i].complete||imgs[i].naturalWidth===0){ok=false;
console.error('plot failed to render: '+imgs[i].alt);}}document.body.setAttribute('data-plots-ok',String(ok));});"""


def _e(x) -> str:
    return html.escape(str(x))


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
    if row.get("scope") != "aggregate" and "group" not in row:
        return None
    where = row.get("backend", "") if row["env"] == "virtual" else "host"
    # a sweep's block (a node count, a device) names the point too, unless it is the backend (a column)
    block = "" if row.get("block") in (None, "", row.get("backend")) else str(row["block"])
    return (exp, row.get("group", "") or block, row["point"], where, metric)


def pe_ve_table(rows: list[dict], headlines: dict[str, str]) -> str:
    cells: dict[tuple, dict[str, list[float]]] = {}
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
    if not cells:
        return "<p>No measured points.</p>"
    envs = ["host"] + sorted(e for e in envs if e != "host")
    head = "".join(f"<th>{_e(e)}</th>" for e in envs)
    body = []
    for (exp, group, point, metric), by_env in sorted(cells.items(), key=lambda kv: _natural(kv[0])):
        host = summarize(by_env["host"]["values"]).mean if "host" in by_env else None
        tds = []
        for env in envs:
            if env not in by_env:
                tds.append("<td>-</td>")
                continue
            cell = by_env[env]
            st = summarize(cell["values"])
            ratio = f" <small>({st.mean / host:.2f}x)</small>" if host and env != "host" else ""
            why = noisy_reason(cell["values"], cell["cv"], cell["unquiet"][:1])
            flag = f" <span class=noisy title='{_e(why)}'>noisy</span>" if why else ""
            tds.append(f"<td>{_e(st.format())}{ratio}{flag}</td>")
        name = f"{exp} {group} {point}" if group and group != exp else f"{exp} {point}"
        body.append(f"<tr><td>{_e(name)} <small>{_e(metric)}</small></td>{''.join(tds)}</tr>")
    return (f"<table><tr><th>point (metric)</th>{head}</tr>{''.join(body)}</table>"
            "<p><small>Mean over shuffled repeats ± 95% CI (Student t) and CV where repeated; (x) = virtual / "
            "physical; <span class=noisy>noisy</span>: CV over the threshold, or a repeat whose host was not quiet "
            "or whose participants did not run together (hover for why).</small></p>")


def run_section(run: Path, headlines: dict[str, str]) -> str:
    manifest = json.loads((run / "run.json").read_text())
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()] \
        if (run / "samples.jsonl").exists() else []
    env = manifest.get("environment") or {}
    parts = [f"<h2>{_e(manifest['run_id'])}: {_e(manifest.get('experiment'))} "
             f"<small>({_e(manifest.get('status'))})</small></h2>"]
    if env.get("accel") == "tcg":
        parts.append("<p class=warn>accel=tcg: these numbers describe an emulated CPU, not storage performance; "
                     "compare them only within this run.</p>")
    parts += ["<h3>Physical against virtual</h3>", pe_ve_table(rows, headlines)]
    failures = [r for r in rows if r.get("status") != "ok"]
    skipped = manifest.get("skipped") or {}
    retried = {(r.get("point_id"), r.get("repeat")): r for r in rows if r.get("retried_after")}
    if failures or skipped or retried:
        parts.append("<h3>Failures, retries and skipped</h3><ul>")
        parts += [f"<li class=fail>{_e(r.get('point'))} ({_e(r.get('env'))} {_e(r.get('backend', ''))}): "
                  f"{_e(r.get('error'))}</li>" for r in failures]
        parts += [f"<li>measured again, repeat {_e(r.get('repeat'))} of {_e(pid)}: its guest was lost and "
                  f"restarted: {_e(r['retried_after'].splitlines()[0])}</li>" for (pid, _), r in retried.items()]
        parts += [f"<li>skipped {_e(k)}: {_e(v)}</li>" for k, v in skipped.items()]
        parts.append("</ul>")
    if (run / "summary.txt").exists():
        parts.append(f"<h3>Summary</h3><pre>{_e((run / 'summary.txt').read_text())}</pre>")
    for png in sorted(run.glob("*.png")):
        data = base64.b64encode(png.read_bytes()).decode()
        parts.append(f"<figure><img alt='{_e(png.name)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{_e(png.name)}</figcaption></figure>")
    parts.append("<h3>Environment</h3><table>" + "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in env.items()) + "</table>")
    parts.append(f"<details><summary>Configuration</summary><pre>{_e(json.dumps(manifest.get('config'), indent=2))}"
                 f"</pre></details>")
    return "\n".join(parts)


def render(runs: list[Path], headlines: dict[str, str] | None = None) -> str:
    """The page; `headlines` ({experiment: its headline metric}) serves runs whose samples predate
    recording their headline."""
    body = "\n".join(run_section(r, headlines or {}) for r in runs)
    title = "vtb report: " + ", ".join(r.name for r in runs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{STYLE}</style>"
            f"</head><body><h1>{_e(title)}</h1>{body}<script>{CHECK}</script></body></html>")
