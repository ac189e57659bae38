"""One progress bar over a whole run: the point in progress, points done of planned, and an ETA:
the run's plan (harness/measure/plan.py: what this host's runs have cost) until points are done,
then learned from them (rich's speed estimate). Shown on a terminal only; the step lines stay, so
logs read the same."""
from __future__ import annotations

import datetime

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from harness.common.console import console


class PlannedRemaining(ProgressColumn):
    """The time left: the plan's per-point estimate times the points left, until the points done
    give a speed of their own."""

    def render(self, task: Task) -> Text:
        left = (task.total or 0) - task.completed
        per_point = task.fields.get("planned_s_per_point")
        if task.speed:   # learned from the points done
            seconds = left / task.speed
        elif per_point:
            seconds = left * per_point
        else:
            return Text("-:--:--", style="progress.remaining")
        return Text(str(datetime.timedelta(seconds=max(0, int(seconds)))), style="progress.remaining")


class RunProgress:
    def __init__(self, title: str):
        self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("ETA"), PlannedRemaining(), console=console,
                             disable=not console.is_terminal, transient=False)
        self._title = title
        self._task = self._bar.add_task(title, total=0)

    def __enter__(self) -> "RunProgress":
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def plan(self, seconds_per_point: float) -> None:
        """The plan's estimate of one point run (setups spread over them), for the ETA before any is done."""
        self._bar.update(self._task, planned_s_per_point=seconds_per_point)

    def add(self, points: int) -> None:
        """More point runs planned (a block declared, or an adaptive round); fewer when negative
        (a resumed run's points done before)."""
        task = self._bar.tasks[0]
        self._bar.update(self._task, total=(task.total or 0) + points)

    def start(self, what: str) -> None:
        self._bar.update(self._task, description=f"{self._title}: {what}")

    def done(self) -> None:
        self._bar.advance(self._task)
