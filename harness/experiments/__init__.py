"""One module per `harness run X`, found automatically: a module here that defines EXPERIMENT is
an experiment. Each gets a RunContext and records Samples through its store."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Protocol

from harness.config import Config
from harness.plugins import discover
from harness.store import RunStore
from harness.testbed import TestbedRecord


@dataclass
class RunContext:
    cfg: Config
    testbed: TestbedRecord | None   # the user's fleet, for experiments that use it
    store: RunStore
    environment: dict


class Experiment(Protocol):
    name: str
    uses_fleet: bool   # runs on the user's fleet (else brings up its own)
    host_kinds: tuple[str, ...]  # the hosts (harness.hosts) its host-side measurements can run on

    def run(self, ctx: RunContext) -> None:
        """Measures every point, adding samples to ctx.store as each point completes."""

    def summarize(self, ctx: RunContext) -> None:
        """Writes plots and prints the summary, from the samples stored so far."""


@cache
def registry() -> dict[str, Experiment]:
    return discover(__name__, __path__, "EXPERIMENT")
