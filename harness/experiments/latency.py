"""`harness run latency`: QD1 4 KiB latency (seq/rand x read/write) per backend and on the host: mean/p50/p99/p99.9 and VE/PE.
Config section [latency]; `tools` adds the same points measured by another workload tool (its
points are named `<pattern>-qd1-<tool>`)."""
from typing import Literal

from pydantic import Field, field_validator

from harness.common.schema import BlockSize
from harness.experiments import sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings
from harness.workloads import qd1_tools, tools


class Settings(SweepSettings):
    patterns: list[Literal["randread", "randwrite", "read", "write"]] = Field(
        ["randread", "randwrite", "read", "write"], min_length=1, description="access patterns at QD1")
    bs: BlockSize = Field("4k", description="block size")
    tools: list[str] = Field(["fio"], min_length=1, description="the workload tools that measure each pattern "
                                                                "(`fio`, or another QD1 tool of harness/workloads/)")

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, names: list[str]) -> list[str]:
        if unknown := [n for n in names if n not in qd1_tools()]:
            raise ValueError(f"no QD1 latency tool named {', '.join(unknown)}; choose from {', '.join(qd1_tools())}")
        return list(dict.fromkeys(names))


class Latency(FioMatrix):
    question = "QD1 latency, the host against each backend"
    name = section = "latency"
    Settings = Settings
    headline = "lat_mean"
    flags = sweep_flags("latency", backends_field="latency.backends")

    def guest_image(self, cfg) -> str:
        """The full image where another tool than fio measures (it holds every workload's)."""
        return "full" if set(self.settings(cfg).tools) - {"fio"} else "fio"

    def host_packages(self, cfg) -> tuple[str, ...]:
        return tuple(p for name in self.settings(cfg).tools for p in tools()[name].host_packages)

    def group_points(self, cfg) -> list[FioPoint]:
        c = self.settings(cfg)
        found = tools()
        return [FioPoint(self.name, f"{rw}-qd1" + ("" if name == "fio" else f"-{name}"), tool.qd1_job(c, rw, c.bs),
                         self.headline, tool=tool)
                for name, tool in ((n, found[n]) for n in c.tools) for rw in c.patterns]


EXPERIMENT = Latency()
