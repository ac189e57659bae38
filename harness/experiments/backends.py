"""`harness run backends`: latency, iops and bandwidth, on the host and in a VM, for virtio-blk and
virtio-scsi by default, the backends in [backends].backends, or with `--full` every backend (each
that cannot run here listed with its reason). Every point runs [backends].runtime_s after
[backends].ramp_s (the groups' own are their own experiments'): ten points a backend fit a default
run of two backends within half an hour on a small machine."""
from dataclasses import replace

from pydantic import Field

from harness import backends
from harness.backends import BackendNames
from harness.common.schema import StudySection
from harness.config.core import Config
from harness.experiments import Flag, full_flag
from harness.experiments.fio_matrix import FioMatrix, FioPoint

GROUPS = ("latency", "iops", "bandwidth")


class Settings(StudySection):
    FULL = {"backends": []}
    backends: BackendNames = Field(["virtio-blk", "virtio-scsi"], description="backends for `harness run backends`; "
                                   "empty (and full) = every one")
    runtime_s: int = Field(6, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(1, ge=0, le=3600, description="unmeasured warm-up seconds per point")


class Backends(FioMatrix):
    question = "Each backend against the host: latency, IOPS, bandwidth"
    name = section = "backends"
    Settings = Settings
    groups = GROUPS
    headline = "iops"
    flags = (Flag("--backend", ("backends.backends",), "Comma-separated backends."),
             Flag("--runtime", ("backends.runtime_s",)), Flag("--ramp", ("backends.ramp_s",)), full_flag("backends"))

    def points(self, cfg: Config) -> list[FioPoint]:
        """The groups' points, each run for this experiment's runtime after its ramp."""
        c = cfg.backends
        return [replace(p, job=p.job.model_copy(update={"runtime_s": c.runtime_s, "ramp_s": c.ramp_s}))
                for p in super().points(cfg)]

    def backend_names(self, cfg: Config) -> list[str]:
        return cfg.backends.backends or [n for n, b in backends.all_backends().items() if not b.diagnostic]


EXPERIMENT = Backends()
