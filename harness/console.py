"""Console output: one line per step with the elapsed time, readable in a terminal and in CI logs."""
from __future__ import annotations

import sys
import time

from rich.console import Console

# Logs (CI, pipes) get a wide fixed width rather than rich's 80-column default.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
_start = time.monotonic()


def step(msg: str) -> None:
    console.print(f"[dim]{time.monotonic() - _start:7.1f}s[/dim]  {msg}", soft_wrap=True)


def warn(msg: str) -> None:
    console.print(f"[dim]{time.monotonic() - _start:7.1f}s[/dim]  [yellow]warning:[/yellow] {msg}", soft_wrap=True)
