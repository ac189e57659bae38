"""`harness run tuning`'s answer, from its samples: per workload, the best configuration against
the configured disk (the default) and against the host, a winner named only where the test allows;
the knobs that made no difference at this precision; and the winning configuration's libvirt XML.

Each configuration is a block with the host's points in its own shuffled rounds, so each repeat's
virtual figure is judged against the host's of the same round (its VE/PE ratio), and two
configurations are compared on those ratios: Welch's test on their logs (analysis/stats.py), Holm
over every comparison of the run (workloads x configurations), and a winner needs the whole CI of
its lead on the better side."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.table import Table

from harness import backends
from harness.analysis.stats import Difference, center, difference, holm, on_logs, p_text, summarize, wins
from harness.common.console import console
from harness.common.files import write_atomic
from harness.experiments import RunContext
from harness.report import tables
from harness.results.environment import accel_label, tcg_caveat
from harness.results.metrics import LOWER, direction

GROUP = "tuning"
DEFAULT = "default"
ALPHA = 0.05


@dataclass
class Choice:
    """A configuration on a workload: its VE/PE ratio per repeat, and its I/Os per host CPU-second."""
    label: str
    ratios: list[float]
    per_cpu: list[float] = field(default_factory=list)
    against_default: Difference | None = None
    p: float | None = None           # Holm-adjusted
    lead: bool = False               # significantly better than the default

    def differs(self) -> bool:
        """Significantly apart from the default, either way (its CI clear of 1, Holm-adjusted p)."""
        d = self.against_default
        return d is not None and self.p is not None and self.p < ALPHA and not d.low <= 1 <= d.high

    def lags(self) -> bool:
        """Significantly behind the default."""
        return self.differs() and not self.lead

    def best_case(self, lower: bool) -> float | None:
        """The largest lead over the default its CI allows (0 where it allows none), or None untested."""
        d = self.against_default
        return None if d is None else max(0.0, (1 - d.low) if lower else (d.high - 1))


@dataclass
class Workload:
    name: str
    metric: str
    lower: bool
    choices: dict[str, Choice]

    def best(self) -> Choice | None:
        """The configuration that beats the default by the most, where the test allows one; None: none does."""
        leaders = [c for c in self.choices.values() if c.lead]
        logs = on_logs(*(c.ratios for c in leaders)) if leaders else True
        return (min if self.lower else max)(leaders, key=lambda c: center(c.ratios, logs)) if leaders else None


def collect(rows: list[dict]) -> list[Workload]:
    """Each workload's configurations, from the measured repeats: ratios pair a virtual figure with
    the host's of its block and round."""
    figures: dict[str, dict] = {}
    for r in rows:
        if (r.get("group") != GROUP or r.get("status") != "ok" or r.get("repeat") == "all"
                or r.get("value") is None or r.get("env") is None):
            continue
        w = figures.setdefault(r["workload"], {"metric": None, "at": {}})
        if r.get("headline") and r["metric"] == r["headline"]:
            w["metric"] = r["metric"]
        w["at"].setdefault((r["choice"], r["env"], r["metric"]), {})[r["repeat"]] = float(r["value"])
    out = []
    for name, w in sorted(figures.items()):
        if (metric := w["metric"]) is None:
            continue
        choices = {}
        for label in sorted({choice for choice, _, _ in w["at"]}):
            virt, host = w["at"].get((label, "virtual", metric), {}), w["at"].get((label, "physical", metric), {})
            ratios = [virt[i] / host[i] for i in sorted(virt) if host.get(i)]
            if ratios:
                choices[label] = Choice(label, ratios, list(w["at"].get((label, "virtual", "ios_per_cpu_s"), {}).values()))
        if DEFAULT in choices:
            out.append(Workload(name, metric, direction(metric) is LOWER, choices))
    return out


def decide(found: list[Workload]) -> None:
    """Every configuration against the default on each workload, Holm over all of them."""
    tests = [(w, c, difference(w.choices[DEFAULT].ratios, c.ratios)) for w in found for c in w.choices.values()
             if c.label != DEFAULT]
    for (w, c, diff), p in zip(tests, holm([d.p_value if d else None for _, _, d in tests])):
        c.against_default, c.p = diff, p
        c.lead = wins(diff, p, w.lower, ALPHA)


def idle_knobs(found: list[Workload]) -> dict[str, list[str]]:
    """Each knob whose every value tried differed from the default on no workload: its values."""
    tried: dict[str, set[str]] = {}
    moved: set[str] = set()
    for w in found:
        for c in w.choices.values():
            if c.against_default is None:   # untested (one repeat, or no spread): says nothing
                continue
            for change in c.label.split(",") if c.label != DEFAULT else ():
                knob, value = change.split("=", 1)
                tried.setdefault(knob, set()).add(value)
                if c.differs():
                    moved.add(knob)
    return {k: sorted(v) for k, v in tried.items() if k not in moved}


def winner(found: list[Workload]) -> str:
    """The configuration that leads on the most workloads and lags on none (the default where none
    does); between as many leads, the larger product of its leads."""
    lagging = {c.label for w in found for c in w.choices.values() if c.lags()}
    leads: dict[str, list[float]] = {}
    for w in found:
        if (best := w.best()) and best.label not in lagging:
            change = best.against_default.ratio
            leads.setdefault(best.label, []).append(1 / change if w.lower else change)
    return max(leads, key=lambda k: (len(leads[k]), math.prod(leads[k]))) if leads else DEFAULT


def _share(c: Choice) -> str:
    """Its VE/PE ratio: a share of the host's figure, or a multiple of it past 2 (a latency)."""
    st = summarize(c.ratios)
    if st.mean >= 2:
        return f"{st.mean:.1f}x" + (f" ± {st.ci95:.1f}" if st.ci95 is not None else "")
    form = ".0%" if st.mean >= 0.1 else ".1%"
    return f"{st.mean:{form}}" + (f" ± {st.ci95:{form}}" if st.ci95 is not None else "")


def _per_cpu(c: Choice) -> str:
    return f"{sum(c.per_cpu) / len(c.per_cpu):,.0f}" if c.per_cpu else "-"


def answer_lines(found: list[Workload], backend: str) -> list[str]:
    lines = []
    for w in found:
        best, default = w.best(), w.choices[DEFAULT]
        if best is None:
            bound = max((b for c in w.choices.values() if not c.lags()
                         and (b := c.best_case(w.lower)) is not None), default=None)
            lines.append(f"{w.name}: keep the configured {backend} ({w.metric} {_share(default)} the host's); no "
                         "setting tried beat it at this precision" + (f" (none by more than {bound:.0%})" if bound else ""))
            continue
        d = best.against_default
        lines.append(f"{w.name}: {best.label}, {d.percent()} against the configured {backend} ({p_text(best.p)}, Holm); "
                     f"{w.metric} {_share(best)} the host's, against {_share(default)}")
    return lines


def report(ctx: RunContext) -> None:
    """The answer first (printed, in summary.txt and the report's verdict), the table of every
    configuration, the idle knobs, then the winning configuration's XML."""
    rows = [{**s.metadata, "metric": s.metric, "value": s.value, "status": s.status} for s in ctx.store.samples]
    found = collect(rows)
    if not found:
        return
    decide(found)
    backend = ctx.cfg.tuning.backend
    accel = accel_label(ctx.environment)
    answer = answer_lines(found, backend)
    tables.record_text(f"which settings of {backend}, per workload", answer, verdict=True)
    table = Table(title=f"tuning {backend}: each configuration's share of the host (VE/PE, mean ± 95% CI), its lead "
                        f"over the configured disk and I/Os per host CPU-second (accel={accel}{tcg_caveat(accel)})")
    for col in ("workload", "configuration", "of the host", "against the default", "p (Holm)", "I/Os per CPU-s"):
        table.add_column(col, justify="left" if col in ("workload", "configuration") else "right")
    for w in found:
        for c in sorted(w.choices.values(), key=lambda c: c.label != DEFAULT):
            table.add_row(w.name, c.label, _share(c), c.against_default.percent() if c.against_default else "-",
                          p_text(c.p) if c.p is not None else "-", _per_cpu(c))
    idle = idle_knobs(found)
    trades = {k.field: k.trades for k in backends.get(backend).knobs}
    notes = [f"{k} = {', '.join(v)} ({trades.get(k, 'a knob of ' + backend)}): no difference from the configured disk "
             "at this precision" for k, v in idle.items()]
    chosen = winner(found)
    kept = ctx.store.dir / "raw" / GROUP
    xml = (kept / f"{chosen}.xml").read_text() if (kept / f"{chosen}.xml").exists() else ""
    command = (kept / f"{chosen}.host-command").read_text() if (kept / f"{chosen}.host-command").exists() else ""
    said = (f"the best configuration ({chosen})" if chosen != DEFAULT else f"the configured {backend} ({DEFAULT}), "
            "which no setting tried beat") + ": its libvirt XML"
    table_text = tables.render([table], [])          # recorded after the answer, before the XML the report ends with
    tables.record_text("knobs that made no difference", notes)
    tables.record_text(said, xml.splitlines() or ["not kept with the run"], code=bool(xml))
    host_side = f"\nits host side's command line:\n{command}" if command else ""
    if command:
        tables.record_text("its host side's command line", [command], code=True)
    for line in answer + notes:
        console.print(line, highlight=False)
    console.print(f"{said}:\n{xml}{host_side}", highlight=False, markup=False)
    text = "\n".join(answer) + "\n\n" + table_text + "\n".join(notes)
    write_atomic(ctx.store.dir / "summary.txt", f"{text}\n\n{said}:\n{xml}{host_side}")
