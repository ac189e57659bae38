"""One module per `harness run X`. Each gets a RunContext and records Samples through its store."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from harness.config import Config
from harness.store import RunStore
from harness.testbed import TestbedRecord


@dataclass
class RunContext:
    cfg: Config
    testbed: TestbedRecord
    store: RunStore
    environment: dict


class Experiment(Protocol):
    name: str

    def run(self, ctx: RunContext) -> None:
        """Measures every point, adding samples to ctx.store as each point completes."""

    def summarize(self, ctx: RunContext) -> None:
        """Writes plots and prints the summary, from the samples stored so far."""


def registry() -> dict[str, Experiment]:
    from harness.experiments import vm_scaling
    return {e.name: e for e in (vm_scaling.VmScaling(),)}
