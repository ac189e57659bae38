"""One progress bar over a whole run: the point in progress, points done of planned, and an ETA
learned from the points done (rich's speed estimate). Shown on a terminal only; the step lines
stay, so logs read the same."""
from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from harness.common.console import console


class RunProgress:
    def __init__(self, title: str):
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
                             disable=not console.is_terminal, transient=False)
        self._title = title
        self._task = self._bar.add_task(title, total=0)

    def __enter__(self) -> "RunProgress":
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def add(self, points: int) -> None:
        """More point runs planned (a block declared, or an adaptive round)."""
        task = self._bar.tasks[0]
        self._bar.update(self._task, total=(task.total or 0) + points)

    def start(self, what: str) -> None:
        self._bar.update(self._task, description=f"{self._title}: {what}")

    def done(self) -> None:
        self._bar.advance(self._task)
