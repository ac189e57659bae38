"""What an experiment's run is given: the config, the user's fleet (for experiments that use it),
the run's store and environment, its host(s), its plan, and the progress bar; and the run's
measurement pipeline, made from them. The plan is the one `--plan` prints: what the run counts
comes from it, and what the run makes is checked against it (PlanDisagrees, a bug)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.common.progress import RunProgress
from harness.config.core import Config
from harness.fleet.testbed import Testbed, TestbedRecord
from harness.hosts import Host
from harness.measure.pipeline import Pipeline, Point, Site, new_seed
from harness.measure.plan import Block, Plan, PlanDisagrees
from harness.results.store import RunStore


@dataclass
class RunContext:
    cfg: Config
    testbed: TestbedRecord | None   # the user's fleet, for experiments that use it
    store: RunStore
    environment: dict
    host: Host
    progress: RunProgress | None = None
    testbeds: list[TestbedRecord] = field(default_factory=list)   # one per host the fleet spans
    hosts: list[Host] = field(default_factory=list)               # those hosts, in the same order
    planned: Plan | None = None     # the experiment's plan for this config (the runner's; a test's)

    def pipeline(self, uri: str, quiet_prefixes: tuple[str, ...], sites: list[Site] | None = None) -> Pipeline:
        """The run's measurement pipeline on the fleet at `uri` (or on every site of a fleet that
        spans hosts); idle VMs of `quiet_prefixes` (and of the user's fleet) are suspended during each point."""
        seed = self.store.manifest.get("seed")   # one seed for the whole run, a resumed one's too
        if seed is None:
            seed = self.cfg.repeat.seed if self.cfg.repeat.seed is not None else new_seed()
            self.store.update_manifest(seed=seed)
        return Pipeline(store=self.store, repeat=self.cfg.repeat, settle=self.cfg.settle, seed=seed, host=self.host, uri=uri,
                        quiet_prefixes=(*quiet_prefixes, self.cfg.prefix + "-"), progress=self.progress, sites=sites,
                        base_meta={"run_id": self.store.run_id, "experiment": self.store.manifest.get("experiment"),
                                   **self.environment})

    def rebuilt_fleet(self) -> dict:
        """The user's fleet (on one host) built anew, for a pipeline whose guest could not be
        restarted; its metadata."""
        self.testbed = Testbed(self.cfg, self.host).rebuilt()
        self.testbeds = [self.testbed]
        return self.testbed.metadata()

    def plan(self, runs: int) -> None:
        """Declares point runs to come (for the progress bar and its ETA)."""
        if self.progress:
            self.progress.add(runs)

    def planned_runs(self, blocks: list[str] | None = None) -> int:
        """The point runs the plan has in these blocks (all of them by default)."""
        if self.planned is None:
            raise PlanDisagrees("the run was given no plan: RunContext(planned=the experiment's plan(cfg))")
        return self.planned.runs_in(self.planned.blocks if blocks is None else [self.planned.block(b) for b in blocks])

    def made_as_planned(self, blocks: list[Block], points: list[Point], made: Counter | None = None) -> Counter:
        """The points made so far in these planned blocks (by environment), `points` added: more of
        an environment than the blocks plan is PlanDisagrees, before anything of them runs."""
        made = (made or Counter()) + Counter(p.env for p in points)
        if extra := made - _envs(blocks):
            raise PlanDisagrees(f"{self.planned.experiment}: its run makes {dict(extra)} more point(s) in "
                                f"{', '.join(b.label for b in blocks)} than its plan has")
        return made

    def unmade_forgotten(self, blocks: list[Block], made: Counter) -> None:
        """The planned points of these blocks that the run did not make (a filesystem this host
        lacks, a rate step without its bound) taken off the progress bar."""
        if missing := sum((_envs(blocks) - made).values()):
            self.plan(-missing * self.planned.repeats)


def _envs(blocks: list[Block]) -> Counter:
    """How many points of each environment these planned blocks have."""
    return Counter(p.env for b in blocks for p in b.points)
