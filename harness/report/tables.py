"""What every experiment's summary table shares: means over repeats with their CI, the noisy
flag and its notes, failed and unmeasured cells, and rendering to the terminal and summary.txt."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.analysis import overlap
from harness.analysis.stats import noisy_reason, summarize
from harness.common.console import console as shared
from harness.results.samples import Sample

STATS = "#stats"  # row[key + STATS]: the Summary behind row[key] (a mean over repeats)


VALUES = "#values"  # row[key + VALUES]: the repeat values behind row[key]
NOISY = "#noisy"  # row[key + NOISY]: why the repeats behind row[key] are not to be trusted ("" = fine)


NOISY_MARK = " (noisy)"


def measured(s: Sample) -> bool:
    """A sample of one repeat (not a value derived over repeats, such as a VE/PE ratio)."""
    return s.metadata.get("repeat") != "all"


def flag_noisy(d: dict, key: str, unquiet: list[str], threshold: float) -> None:
    """Sets d[key + NOISY] from the repeat values in d[key] (call before _means)."""
    if isinstance(d.get(key), list):
        d[key + NOISY] = noisy_reason(d[key], threshold, unquiet)


def unquiet_reasons(meta: dict) -> list[str]:
    """Why a sample's conditions were not clean: a busy host, a point measured before steady state,
    or participants that did not overlap."""
    reasons = [] if meta.get("host_quiet") is not False else [meta.get("quiet_reason") or "host busy"]
    if meta.get("steady_state_reached") is False:   # preconditioned, and fio did not find it steady in time
        reasons.append(f"measured before steady state ({meta.get('steady_state_criterion') or 'no detection'} "
                       f"not met within {meta.get('steady_state_after_s') or 0:.0f} s)")
    return reasons + ([why] if (why := overlap.reason(meta)) else [])


def means(d: dict) -> dict:
    """Replaces every list of repeat values in d by its mean, keeping the Summary beside it."""
    for key, value in list(d.items()):
        if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            st = summarize(value)
            d[key], d[key + STATS], d[key + VALUES] = st.mean, st, value
    return d



# the tables a run's summary renders, kept as data too (summary.json) for the HTML report's own tables
_RECORDED: ContextVar[list[dict] | None] = ContextVar("recorded_tables", default=None)


@contextmanager
def recorded() -> Iterator[list[dict]]:
    """Every table `render` prints inside the block, as {title, caption, columns, rows, notes, failures}."""
    kept: list[dict] = []
    token = _RECORDED.set(kept)
    try:
        yield kept
    finally:
        _RECORDED.reset(token)


def record_text(title: str, paragraphs: list[str], verdict: bool = False, code: bool = False) -> None:
    """What a summary says that is not a table (a study's comparison, a method's limits), kept for
    the report beside its tables; `verdict`: the study's own answer, which the report opens with;
    `code`: lines to paste as they are (XML, a command line), shown as one preformatted block."""
    if (kept := _RECORDED.get()) is not None:
        text = [p for p in paragraphs if p.strip()] if code else [" ".join(p.split()) for p in paragraphs if p.strip()]
        kept.append({"title": title, "text": text, **({"verdict": True} if verdict else {}),
                     **({"code": True} if code else {})})


def as_data(t: Table) -> dict:
    columns = [str(c.header) for c in t.columns]
    cells = [[str(x) for x in c.cells] for c in t.columns]
    return {"title": str(t.title or ""), "caption": str(t.caption or ""), "columns": columns,
            "right": [c.justify == "right" for c in t.columns], "rows": [list(r) for r in zip(*cells)]}


def render(tables: list[Table], failures: list[tuple[str, str]], width: int = 100,
            notes: list[tuple[str, str]] = ()) -> str:
    """Prints the tables, the noisy points and the failures under them; returns the same as plain text."""
    if (kept := _RECORDED.get()) is not None:
        data = [as_data(t) for t in tables] or [{"title": "", "caption": "", "columns": [], "right": [], "rows": []}]
        data[-1].update(notes=[list(n) for n in notes], failures=[list(f) for f in failures])
        kept += data
    console = Console(record=True, highlight=False, width=max(shared.width, width))
    for t in tables:
        console.print(t)
    _render_notes(console, list(notes))
    for what, error in failures:
        console.print(Text(f"{what} failed", style="red").append(f": {error}"))
    return console.export_text()


def cell(row: dict, key: str, digits: int = 0) -> str:
    """A number; 'failed' where the point failed; '-' where it was not measured (e.g. interrupted).
    A noisy point is marked."""
    if row.get(key) is not None:
        return with_ci(row[key], row.get(key + STATS), digits) + (NOISY_MARK if row.get(key + NOISY) else "")
    return "failed" if row.get(f"{key.split('_')[0]}_failed") else "-"


def noisy_notes(named: list[tuple[str, dict]], metric: str = "") -> list[tuple[str, str]]:
    """(what, why) for every noisy value (of `metric`, or any) in the named dicts, printed under the table."""
    return [(f"{name} {key.removesuffix(NOISY)}", why) for name, d in named for key, why in d.items()
            if key.endswith(NOISY) and why and key.removesuffix(NOISY).endswith(metric)]


def _render_notes(console: Console, notes: list[tuple[str, str]]) -> None:
    for what, why in notes:
        console.print(Text("noisy ", style="yellow").append(f"{what}: {why}"))


def with_ci(mean: float, st, digits: int) -> str:
    """The mean, with its CI and CV when it is a mean over repeats."""
    return st.format(digits) if st is not None else f"{mean:,.{digits}f}"


