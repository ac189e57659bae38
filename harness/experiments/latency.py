"""`harness run latency`: QD1 4 KiB latency (seq/rand x read/write) per backend and on the host: mean/p50/p99/p99.9 and VE/PE.
Config section [latency]."""
from typing import Literal

from pydantic import Field

from harness.common.schema import BlockSize
from harness.experiments import sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings


class Settings(SweepSettings):
    patterns: list[Literal["randread", "randwrite", "read", "write"]] = Field(
        ["randread", "randwrite", "read", "write"], min_length=1, description="access patterns at QD1")
    bs: BlockSize = Field("4k", description="block size")


class Latency(FioMatrix):
    question = "QD1 latency, the host against each backend"
    name = section = "latency"
    Settings = Settings
    headline = "lat_mean"
    flags = sweep_flags("latency", backends_field="latency.backends")

    def group_points(self, cfg) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(self.name, f"{rw}-qd1", c.job(rw=rw, bs=c.bs, iodepth=1, numjobs=1), self.headline) for rw in c.patterns]


EXPERIMENT = Latency()
