"""One module per `harness run X`, found automatically: a module here that defines EXPERIMENT is
an experiment. It declares its points; harness.pipeline measures them."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Protocol

from harness.config import Config
from harness.hosts import Host
from harness.pipeline import Pipeline, new_seed
from harness.plugins import discover
from harness.progress import RunProgress
from harness.store import RunStore
from harness.testbed import TestbedRecord


@dataclass
class RunContext:
    cfg: Config
    testbed: TestbedRecord | None   # the user's fleet, for experiments that use it
    store: RunStore
    environment: dict
    host: Host
    progress: RunProgress | None = None

    def pipeline(self, uri: str, quiet_prefixes: tuple[str, ...]) -> Pipeline:
        """The run's measurement pipeline on the fleet at `uri`; idle VMs of `quiet_prefixes`
        (and of the user's fleet) are suspended during each point."""
        seed = self.cfg.repeat.seed if self.cfg.repeat.seed is not None else new_seed()
        self.store.update_manifest(seed=seed)
        return Pipeline(store=self.store, repeat=self.cfg.repeat, settle=self.cfg.settle, seed=seed, host=self.host, uri=uri,
                        quiet_prefixes=(*quiet_prefixes, self.cfg.prefix + "-"), progress=self.progress,
                        base_meta={"run_id": self.store.run_id, "experiment": self.store.manifest.get("experiment"),
                                   **self.environment})

    def plan(self, runs: int) -> None:
        """Declares point runs to come (for the progress bar and its ETA)."""
        if self.progress:
            self.progress.add(runs)


class Experiment(Protocol):
    name: str
    uses_fleet: bool   # runs on the user's fleet (else brings up its own)
    host_kinds: tuple[str, ...]  # the hosts (harness.hosts) its host-side measurements can run on

    def run(self, ctx: RunContext) -> None:
        """Declares its points and has the pipeline measure them (samples are stored as each completes)."""

    def summarize(self, ctx: RunContext) -> None:
        """Writes plots and prints the summary, from the samples stored so far."""


@cache
def registry() -> dict[str, Experiment]:
    return discover(__name__, __path__, "EXPERIMENT")
