"""`harness run backends`: latency, iops and bandwidth for every backend that passes preflight
(or those in [backends].backends). Backends that cannot run are listed with their reason."""
from pydantic import Field

from harness import backends
from harness.backends import BackendNames
from harness.config.core import Config
from harness.config.schema import Section
from harness.experiments import sweep_flags
from harness.experiments.fio_matrix import FioMatrix

GROUPS = ("latency", "iops", "bandwidth")


class Settings(Section):
    backends: BackendNames = Field([], description="backends for `harness run backends`; empty = every one")


class Backends(FioMatrix):
    name = section = "backends"
    Settings = Settings
    groups = GROUPS
    headline = "iops"
    flags = sweep_flags(*GROUPS, backends_field="backends.backends")

    def backend_names(self, cfg: Config) -> list[str]:
        return cfg.backends.backends or [n for n, b in backends.all_backends().items() if not b.diagnostic]


EXPERIMENT = Backends()
