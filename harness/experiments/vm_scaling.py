"""vm-scaling: the same fio job in 1..N VMs at once on one host device, against host fio on the
same device at the same total concurrency. How does aggregate IOPS scale with the VM count?"""
from __future__ import annotations

from functools import partial

from harness import aggregate
from harness.config import Config
from harness.console import step
from harness.experiments import RunContext
from harness.pipeline import PHYSICAL, VIRTUAL, Point
from harness.report import plots, tables
from harness.store import write_atomic
from harness.workloads import fio


class VmScaling:
    uses_fleet = True
    host_kinds = ("local",)  # the fleet's device is a file prefilled on this machine
    name = "vm-scaling"
    headline = "aggregate_iops"

    def fleet_size(self, cfg: Config) -> int:
        """The fleet this experiment needs: it grows to the largest VM count."""
        return max(cfg.vm_scaling.vm_counts)

    def points(self, ctx: RunContext) -> list[Point]:
        job, tb = ctx.cfg.vm_scaling.job, ctx.testbed
        job_meta = fio.job_meta(job)
        points = []
        for n in ctx.cfg.vm_scaling.vm_counts:
            vms = tb.vms[:n]
            common = dict(parse=fio.parse, aggregate=aggregate.aggregate, headline=self.headline)
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
