"""`harness run latency`: QD1 4 KiB latency (seq/rand x read/write) per backend and on the host: mean/p50/p99/p99.9 and VE/PE.
Config section [latency]."""
from harness.experiments.fio_matrix import FioMatrix


class Latency(FioMatrix):
    name = "latency"
    groups = ("latency",)


EXPERIMENT = Latency()
