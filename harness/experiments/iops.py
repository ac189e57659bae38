"""`harness run iops`: max IOPS at high concurrency (numjobs x iodepth sweep) per backend and on the host.
Config section [iops]."""
from typing import Literal

from pydantic import Field

from harness.common.schema import BlockSize, PositiveInts
from harness.experiments import sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings


class Settings(SweepSettings):
    rw: Literal["randread", "randwrite", "randrw"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="block size")
    numjobs: PositiveInts = Field([1, 4], min_length=1, description="fio jobs per point (swept)")
    iodepth: PositiveInts = Field([16, 64], min_length=1, description="queue depth per job (swept)")


class Iops(FioMatrix):
    question = "Peak IOPS at high concurrency, the host against each backend"
    name = section = "iops"
    Settings = Settings
    headline = "iops"
    flags = sweep_flags("iops", backends_field="iops.backends")

    def group_points(self, cfg) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(self.name, f"{c.rw}-j{j}-qd{qd}", c.job(rw=c.rw, bs=c.bs, iodepth=qd, numjobs=j),
                         self.headline) for j in c.numjobs for qd in c.iodepth]


EXPERIMENT = Iops()
