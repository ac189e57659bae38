"""`harness run iops`: max IOPS at high concurrency (numjobs x iodepth sweep) per backend and on the host.
Config section [iops]."""
from harness.experiments.fio_matrix import FioMatrix


class Iops(FioMatrix):
    name = "iops"
    groups = ("iops",)


EXPERIMENT = Iops()
