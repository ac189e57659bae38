"""`harness run bandwidth`: 128 KiB multi-job sequential bandwidth per backend and on the host.
Config section [bandwidth]."""
from harness.experiments.fio_matrix import FioMatrix


class Bandwidth(FioMatrix):
    name = "bandwidth"
    groups = ("bandwidth",)


EXPERIMENT = Bandwidth()
