"""`harness run bandwidth`: 128 KiB multi-job sequential bandwidth per backend and on the host.
Config section [bandwidth]."""
from typing import Literal

from pydantic import Field

from harness.common.schema import BlockSize
from harness.experiments import sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings


class Settings(SweepSettings):
    patterns: list[Literal["read", "write"]] = Field(["read", "write"], min_length=1,
                                                     description="sequential patterns")
    bs: BlockSize = Field("128k", description="block size")
    numjobs: int = Field(4, ge=1, le=256, description="fio jobs")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth per job")


class Bandwidth(FioMatrix):
    question = "Sequential bandwidth, the host against each backend"
    name = section = "bandwidth"
    Settings = Settings
    headline = "bw"
    flags = sweep_flags("bandwidth", backends_field="bandwidth.backends")

    def group_points(self, cfg) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(self.name, f"{rw}-{c.bs}-j{c.numjobs}",
                         c.job(rw=rw, bs=c.bs, iodepth=c.iodepth, numjobs=c.numjobs), self.headline) for rw in c.patterns]


EXPERIMENT = Bandwidth()
