"""`harness run backends`: latency, iops and bandwidth for every backend that passes preflight
(or those in [backends].backends). Backends that cannot run are listed with their reason."""
from harness import backends
from harness.config import Config
from harness.experiments.fio_matrix import FioMatrix


class Backends(FioMatrix):
    name = "backends"
    groups = ("latency", "iops", "bandwidth")

    def backend_names(self, cfg: Config) -> list[str]:
        return cfg.backends.backends or [n for n, b in backends.all_backends().items() if not b.diagnostic]


EXPERIMENT = Backends()
