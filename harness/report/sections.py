"""A page's generated section: the text between a begin and an end marker, which a command
rewrites (the durations table, the benchmarks' figures) and nothing else touches."""
from __future__ import annotations

from pathlib import Path

from harness.common.files import write_atomic


def has_section(page: Path, markers: tuple[str, str]) -> bool:
    begin, end = markers
    text = page.read_text()
    return begin in text and end in text.split(begin, 1)[1]


def refusal(page: Path, markers: tuple[str, str]) -> str | None:
    """Why the page cannot take the section, with the fix (None: it can)."""
    if has_section(page, markers):
        return None
    return f"{page} has no `{markers[0]}` ... `{markers[1]}` section; fix: add both markers where the table goes"


def section(page: Path, markers: tuple[str, str]) -> str:
    """The text between the page's markers (see has_section)."""
    begin, end = markers
    return page.read_text().split(begin, 1)[1].split(end, 1)[0]


def splice(page: Path, table: str, markers: tuple[str, str]) -> None:
    """Puts the table between the page's markers (see has_section)."""
    begin, end = markers
    head, rest = page.read_text().split(begin, 1)
    write_atomic(page, f"{head}{begin}\n{table}{end}{rest.split(end, 1)[1]}")
