"""One module per `harness run X`, found automatically: a module here that defines EXPERIMENT is
an experiment. It declares its settings (a config section), its command-line flags, its headline
metric and that metric's direction, and its points; harness.measure.pipeline measures them."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Protocol

from harness import workloads
from harness.common.plugins import declared, discover
from harness.common.schema import Section
from harness.config.core import Config
from harness.measure.context import RunContext
from harness.measure.plan import Plan
from harness.measure.sweep import OnFleet, Sweep
from harness.results.columns import Catalog
from harness.results.metrics import direction


@dataclass(frozen=True)
class Flag:
    """An option of `harness run NAME`: sets config fields (dotted paths from the top), typed by the
    first field's annotation; its help defaults to that field's description."""
    option: str                  # e.g. "--vm-counts"
    fields: tuple[str, ...]
    help: str = ""
    switch: Any = None           # not None: an on/off flag that sets the fields to this value
    repeatable: bool = False     # given once or more, its values a list (the field's)


CONFIG_BACKEND = "(default: the config's disk.backend, virtio-blk unless set)"   # a --backend flag's default


def full_flag(section: str) -> Flag:
    """--full: the study's whole matrix instead of the defaults that answer its headline question."""
    return Flag("--full", (f"{section}.full",), "Sweep the study's whole matrix (a long run; see --plan).", switch=True)


def sweep_flags(*sections: str, backends_field: str) -> tuple[Flag, ...]:
    """--backend, --runtime and --ramp, for experiments that sweep backends over fio points."""
    return (Flag("--backend", (backends_field,), f"Comma-separated backends {CONFIG_BACKEND}."),
            Flag("--runtime", tuple(f"{s}.runtime_s" for s in sections)),
            Flag("--ramp", tuple(f"{s}.ramp_s" for s in sections)))


class Experiment(Protocol):
    name: str
    question: str                # what it answers, in a line: its entry in `harness run --help`
    section: str                 # its [section] in the config
    Settings: ClassVar[type[Section]]
    flags: tuple[Flag, ...]
    headline: str                # the metric its tables and report lead with
    uses_fleet: bool   # runs on the user's fleet (else brings up its own); `needs_fleet(cfg)`, where
                       # defined, says it for a config

    def plan(self, cfg: Config) -> Plan:
        """Its blocks and points for this config, without provisioning or measuring anything
        (`harness run NAME --plan`, and the first lines of every run's log)."""

    def measures(self, ctx: RunContext) -> Sweep | OnFleet | None:
        """What the run measures, declared for the host at hand: the blocks of fleets of its own (a
        `Sweep`) or the points on the user's fleet (`OnFleet`); the engine provisions and measures
        them (samples are stored as each completes). None: nothing this host can measure."""

    def summarize(self, ctx: RunContext) -> None:
        """Writes plots and prints the summary, from the samples stored so far."""

    # Optional: `refusal(cfg) -> str | None`, why the config cannot run it (naming the field and
    # the fix), asked before anything starts; `host_packages(cfg) -> tuple[str, ...]`, the Debian
    # packages its own tools need on the host beyond the main job's (a backend declares its own);
    # `guest_image(cfg) -> "fio" | "full"`, the full guest image where its guests run more than
    # fio (fleet.image: built on its first use).


@cache
def registry() -> dict[str, Experiment]:
    return defined(discover(__name__, __path__, "EXPERIMENT"))


def defined(experiments: dict[str, Experiment]) -> dict[str, Experiment]:
    """The experiments, each headline's direction declared: one without is refused where it is
    defined, not judged some way when its first point is compared."""
    for name, exp in experiments.items():
        if direction(exp.headline) is None:
            raise TypeError(f"experiment {name}: its headline {exp.headline!r} has no declared direction. "
                            "Fix: declare it in harness/results/metrics.py")
    return experiments


@cache
def catalog() -> Catalog:
    """Every sample column: the core's, and those each experiment and workload declares in its
    module (`COLUMNS`)."""
    return Catalog([*declared(__name__, __path__, "COLUMNS"), *declared(workloads.__name__, workloads.__path__, "COLUMNS")])
