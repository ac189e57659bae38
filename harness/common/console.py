"""Console output: one line per step with the elapsed time, readable in a terminal and in CI logs.
Messages are printed as text, never as rich markup: they carry user input and error text, and a
bracket in either must not become a markup error."""
from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.text import Text

# Logs (CI, pipes) get a wide fixed width rather than rich's 80-column default.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
# a command's error: on stderr, so that a script reading stdout (--json) gets only its data
errors = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 140)
_start = time.monotonic()


def _line(label: str, style: str, msg: str) -> Text:
    line = Text(f"{time.monotonic() - _start:7.1f}s  ", style="dim")
    if label:
        line.append(label + " ", style=style)
    return line.append(msg)


def step(msg: str) -> None:
    console.print(_line("", "", msg), soft_wrap=True)


def warn(msg: str) -> None:
    console.print(_line("warning:", "yellow", msg), soft_wrap=True)


def error(msg: str) -> None:
    """A command's error: its first line `error: ...` names the fix; details may follow on later lines."""
    errors.print(Text("error: ", style="red").append(msg), soft_wrap=True)


def minutes_seconds(seconds: float) -> str:
    """"6 min 0 s", rounded once (359.6 s is not "5 min 60 s"); under a minute, "42 s"."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def duration(seconds: float) -> str:
    minutes = seconds / 60
    if seconds < 90:
        return f"{seconds:.0f} s"
    if minutes < 10:
        return minutes_seconds(seconds)
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"
