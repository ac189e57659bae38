"""`harness run replay --trace FILE`: an I/O trace (fio's iolog, version 2 or 3; a capture of
`harness run fio-job --capture` among them) replayed on the host (PE) and in a VM on each backend
(VE), side by side; its offsets are checked against the slice first. Config section [replay]."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field

from harness import backends
from harness.backends import BackendNames
from harness.common.schema import Section
from harness.config.core import Config
from harness.experiments import CONFIG_BACKEND, Flag
from harness.experiments.fio_matrix import FioMatrix, FioPoint
from harness.workloads import fio, fio_trace


class Settings(Section):
    trace: Path | None = Field(None, description="the iolog to replay (fio's write_iolog, version 2 or 3; plain or gzipped)")
    backends: BackendNames = Field([], description="backends to compare; empty = disk.backend")
    iodepth: int = Field(16, ge=1, le=4096, description="I/Os in flight while replaying")
    max_s: int = Field(600, ge=1, le=86400, description="a replay ends here even if the trace goes on")


class Replay(FioMatrix):
    question = "An I/O trace replayed on the host and on each backend"
    name = section = "replay"
    Settings = Settings
    headline = "iops"
    plots_percentiles = True
    flags = (Flag("--trace", ("replay.trace",), "The iolog to replay (default: none: it is needed)."),
             Flag("--backend", ("replay.backends",), f"Comma-separated backends {CONFIG_BACKEND}."))

    def trace(self, cfg: Config) -> fio_trace.Trace:
        c = cfg.replay
        return fio_trace.load(c.trace, cfg.fleet.disk_size_mib << 20, iodepth=c.iodepth, max_s=c.max_s)

    def refusal(self, cfg: Config) -> str | None:
        if cfg.replay.trace is None:
            return "replay needs a trace. Fix: --trace FILE (an iolog; `harness run fio-job --capture` makes them)"
        if sliceless := [b for b in self.backend_names(cfg) if not backends.get(b).host_slices]:
            return (f"replay does not run on a backend whose disks the host cannot replay the trace on "
                    f"({', '.join(sliceless)}: not slices of a file or device). Fix: --backend with another backend")
        try:
            self.trace(cfg)
        except fio_trace.TraceError as e:
            return str(e)
        return None

    def group_points(self, cfg: Config) -> list[FioPoint]:
        trace = self.trace(cfg)
        return [FioPoint(self.name, Path(trace.source).stem, trace, self.headline, parse=fio.parse_jobs)]


EXPERIMENT = Replay()
