"""`harness run backends`: latency, iops and bandwidth, on the host and in a VM, for virtio-blk and
virtio-scsi by default, the backends in [backends].backends, or with `--full` every backend (each
that cannot run here listed with its reason)."""
from pydantic import Field

from harness import backends
from harness.backends import BackendNames
from harness.common.schema import StudySection
from harness.config.core import Config
from harness.experiments import full_flag, sweep_flags
from harness.experiments.fio_matrix import FioMatrix

GROUPS = ("latency", "iops", "bandwidth")


class Settings(StudySection):
    FULL = {"backends": []}
    backends: BackendNames = Field(["virtio-blk", "virtio-scsi"], description="backends for `harness run backends`; "
                                   "empty (and full) = every one")


class Backends(FioMatrix):
    question = "Each backend against the host: latency, IOPS, bandwidth"
    name = section = "backends"
    Settings = Settings
    groups = GROUPS
    headline = "iops"
    flags = (*sweep_flags(*GROUPS, backends_field="backends.backends"), full_flag("backends"))

    def backend_names(self, cfg: Config) -> list[str]:
        return cfg.backends.backends or [n for n, b in backends.all_backends().items() if not b.diagnostic]


EXPERIMENT = Backends()
