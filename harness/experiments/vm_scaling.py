"""vm-scaling: the same fio job in 1..N VMs at once on one host device, against host fio on the
same device at the same total concurrency. How does aggregate IOPS scale with the VM count?"""
from __future__ import annotations

from functools import partial
from typing import Annotated

from pydantic import AfterValidator, Field

from harness import aggregate
from harness.config import Config
from harness.console import step
from harness.experiments import Flag, RunContext
from harness.pipeline import PHYSICAL, VIRTUAL, Point
from harness.report import plots, tables
from harness.schema import Section, VmCounts
from harness.store import write_atomic
from harness.workloads import fio


class Settings(Section):
    vm_counts: Annotated[VmCounts, AfterValidator(lambda v: sorted(set(v)))] = Field(
        [1, 2, 4], min_length=1, description="VM counts to sweep; the fleet grows to the largest")
    job: fio.FioJob = fio.FioJob()


class VmScaling:
    uses_fleet = True
    host_kinds = ("local",)  # the fleet's device is a file prefilled on this machine
    name = "vm-scaling"
    section = "vm_scaling"
    Settings = Settings
    headline = "aggregate_iops"
    lower_is_better = False
    flags = (Flag("--vm-counts", ("vm_scaling.vm_counts",), "Comma-separated VM counts, e.g. 1,2,4."),
             *(Flag(f"--{option}", (f"vm_scaling.job.{field}",)) for option, field in (
                 ("runtime", "runtime_s"), ("ramp", "ramp_s"), ("iodepth", "iodepth"), ("bs", "bs"), ("rw", "rw"),
                 ("numjobs", "numjobs"), ("ioengine", "ioengine"))),
             Flag("--backend", ("disk.backend",), "Disk backend; the fleet is re-provisioned when it differs."))

    def fleet_size(self, cfg: Config) -> int:
        """The fleet this experiment needs: it grows to the largest VM count."""
        return max(cfg.vm_scaling.vm_counts)

    def points(self, ctx: RunContext) -> list[Point]:
        job, tb = ctx.cfg.vm_scaling.job, ctx.testbed
        job_meta = fio.job_meta(job)
        points = []
        for n in ctx.cfg.vm_scaling.vm_counts:
            vms = tb.vms[:n]
            common = dict(parse=fio.parse, aggregate=aggregate.aggregate, headline=self.headline, lower_is_better=self.lower_is_better)
            points.append(Point(f"physical-n{n}", PHYSICAL, "host", (), **common,
                                meta={"point": f"physical-n{n}", "vm_count": n, **job_meta},
                                run=partial(fio.on_host, ctx.host, job, device=tb.device_path,
                                            slots=[(vm.slice_offset, vm.slice_bytes) for vm in vms])))
            points.append(Point(f"virtual-n{n}", VIRTUAL, tb.disk["backend"], tuple(vm.name for vm in vms), **common,
                                meta={"point": f"virtual-n{n}", **job_meta}, baseline=f"physical-n{n}",
                                run=partial(fio.in_guests, tb.uri, job, vms)))
        return points

    def run(self, ctx: RunContext) -> None:
        points = self.points(ctx)
        ctx.store.update_manifest(planned=[p.id for p in points])
        ctx.plan(len(points) * ctx.cfg.repeat.count)
        pipeline = ctx.pipeline(ctx.testbed.uri, (ctx.testbed.prefix + "-",))
        pipeline.measure(points, ctx.testbed.metadata())

    def summarize(self, ctx: RunContext) -> None:
        rows = tables.vm_scaling_rows(ctx.store.samples)
        if not rows:
            return
        accel = ctx.environment["accel"]
        job = ctx.cfg.vm_scaling.job
        png = plots.vm_scaling(rows, ctx.store.dir / "vm-scaling.png",
                               title=f"vm-scaling: {job.rw} {job.bs} QD{job.iodepth}, {ctx.testbed.disk['backend']}, "
                                     f"accel={accel}{' (TCG: not performance numbers)' if accel == 'tcg' else ''}; "
                                     "mean ± 95% CI")
        text = tables.print_vm_scaling(rows, accel=accel)
        write_atomic(ctx.store.dir / "summary.txt", text)
        step(f"plot: {png}")


EXPERIMENT = VmScaling()
