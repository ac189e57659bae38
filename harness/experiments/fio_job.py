"""`harness run fio-job --job FILE.fio` (or `--profile NAME`): your own fio job file, as fio reads it, on
the host (PE) and in a VM on each backend (VE), side by side in the pipeline's shuffled rounds.
Every job (or reporting group) and every direction is a point of its own, from the same run;
their latency distributions are plotted against each other. Config section [fio_job]."""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from harness import backends
from harness.backends import BackendNames
from harness.common.schema import Section, VmCounts
from harness.config.core import Config
from harness.experiments import CONFIG_BACKEND, Flag
from harness.experiments.fio_matrix import FioMatrix, FioPoint
from harness.workloads import fio, fio_jobfile


class Settings(Section):
    job: Path | None = Field(None, description="the fio job file to run (its target is set by vtb)")
    profile: str | None = Field(None, description="a shipped profile instead of a file (`harness run fio-job "
                                                  "--profile NAME`; profiles/fio/ lists them)")
    backends: BackendNames = Field([], description="backends to compare; empty = disk.backend")
    vm_counts: Annotated[VmCounts, AfterValidator(lambda v: sorted(set(v)))] = Field(
        [1], min_length=1, description="VMs at once per point (and as many host slots for the baseline), each on "
                                       "its own slice; their figures summed, their latency histograms merged")
    runtime_s: int | None = Field(None, ge=1, le=86400, description="every job's runtime, over the file's (unset = "
                                                                     "the file's own)")
    ramp_s: int | None = Field(None, ge=0, le=3600, description="every job's ramp_time, over the file's (unset = "
                                                                "the file's own)")
    capture: bool = Field(False, description="each measured job writes its iolog into the run folder (raw/, beside "
                                             "fio's report), offsets relative to the slice: `harness run replay "
                                             "--trace FILE` replays it anywhere")
    precondition: bool = Field(False, description="before the measured run, the SNIA way: a sequential fill of the "
                                                  "target, then each job until fio finds it steady")
    steady_criterion: str = Field("iops_slope:10%", pattern=r"^(iops|bw)(_slope)?:\d+(\.\d+)?%?$",
                                  description="fio's steadystate criterion, e.g. iops_slope:10% (the slope of IOPS "
                                              "within 10% of their mean) or iops:20%")
    steady_window_s: int = Field(60, ge=1, le=3600, description="the window over which the criterion must hold "
                                                                "(fio's ss_dur; SNIA's is 5 rounds)")
    steady_ramp_s: int = Field(10, ge=0, le=3600, description="seconds before the criterion is watched (ss_ramp)")
    steady_max_s: int = Field(600, ge=1, le=86400, description="the fill, and each job's run toward steady state, "
                                                               "end here even if not steady (the samples say so)")


class FioJobFile(FioMatrix):
    question = "Your fio job file on the host and on each backend"
    name = "fio-job"
    section = "fio_job"
    Settings = Settings
    headline = "iops"
    plots_percentiles = True
    flags = (Flag("--job", ("fio_job.job",), "Your fio job file (vtb sets only its target; default: none, "
                                              "--job or --profile is needed)."),
             Flag("--profile", ("fio_job.profile",), "A shipped profile (profiles/fio/*.fio) instead of a file "
                                                      "(default: none)."),
             Flag("--backend", ("fio_job.backends",), f"Comma-separated backends {CONFIG_BACKEND}."),
             Flag("--vm-counts", ("fio_job.vm_counts",), "Comma-separated VM counts, e.g. 1,2 (default 1)."),
             Flag("--runtime", ("fio_job.runtime_s",), "Every job's runtime in seconds, over the file's (default: "
                                                     "the file's)."),
             Flag("--ramp", ("fio_job.ramp_s",), "Every job's ramp_time in seconds, over the file's (default: "
                                                  "the file's)."),
             Flag("--precondition", ("fio_job.precondition",), "Fill the target, then run each job until steady, "
                                                               "before measuring (SNIA).", switch=True),
             Flag("--capture", ("fio_job.capture",), "Keep each job's iolog in the run folder, to replay.", switch=True))

    def job_file(self, cfg: Config) -> fio_jobfile.JobFile:
        """The checked file, for a participant's slice of the sweep fleet's device."""
        c = cfg.fio_job
        overrides = {k: str(v) for k, v in (("runtime", c.runtime_s), ("ramp_time", c.ramp_s)) if v is not None}
        pre = fio_jobfile.Precondition(c.steady_criterion, c.steady_window_s, c.steady_ramp_s, c.steady_max_s) \
            if c.precondition else None
        return fio_jobfile.chosen(c.job, c.profile, cfg.fleet.disk_size_mib << 20, overrides=overrides,
                                  precondition=pre, capture=c.capture)

    def refusal(self, cfg: Config) -> str | None:
        c = cfg.fio_job
        if (c.job is None) == (c.profile is None):
            return ("fio-job runs a fio job file or a profile, one of them (fio_job.job, fio_job.profile). Fix: "
                    f"--job FILE.fio, or --profile NAME ({', '.join(fio_jobfile.profiles())})")
        if not all(backends.get(b).host_slices for b in self.backend_names(cfg)):   # the host's librbd: vtb's job only
            return fio_jobfile.ON_RBD
        return fio_jobfile.refusal(lambda: self.job_file(cfg))

    def group_points(self, cfg: Config) -> list[FioPoint]:
        job = self.job_file(cfg)
        label = Path(job.source).stem if cfg.fio_job.job is not None else cfg.fio_job.profile
        counts = cfg.fio_job.vm_counts
        if counts == [1]:
            return [FioPoint(self.name, label, job, self.headline, parse=fio.parse_jobs)]
        # each count's facets named for it: n2/<job>/<direction>
        return [FioPoint(self.name, f"{label}-n{n}", job, self.headline, parse=partial(fio.parse_jobs, prefix=f"n{n}/"),
                         vms=n) for n in counts]


EXPERIMENT = FioJobFile()
