"""vm-scaling: the same fio job in 1..N VMs at once on one host device, against host fio on the
same device at the same total concurrency. How does aggregate IOPS scale with the VM count?"""
from __future__ import annotations

import time

import libvirt

from harness import aggregate
from harness.agent import GuestAgent, in_parallel
from harness.console import step, warn
from harness.experiments import RunContext, repeats
from harness.report import plots, tables
from harness.store import write_atomic
from harness.samples import Sample
from harness.workloads import fio


class VmScaling:
    uses_fleet = True
    host_kinds = ("local",)  # host fio runs on this machine (not yet through harness.hosts)
    name = "vm-scaling"

    def plan(self, ctx: RunContext) -> tuple[list[int], list[int]]:
        fleet = len(ctx.testbed.vms)
        counts = ctx.cfg.vm_scaling.vm_counts
        return [n for n in counts if n <= fleet], [n for n in counts if n > fleet]

    def _metadata(self, ctx: RunContext, env: str, n: int) -> dict:
        job = ctx.cfg.vm_scaling.job
        tb = ctx.testbed
        return {
            "run_id": ctx.store.run_id, "experiment": self.name, "env": env, "vm_count": n,
            "point": f"{env}-n{n}", **tb.disk, "iodepth": job.iodepth, "bs": job.bs, "rw": job.rw,
            "numjobs": job.numjobs, "ioengine": job.ioengine, "direct": job.direct,
            "runtime_s": job.runtime_s, "ramp_s": job.ramp_s, "data_size_bytes": tb.vms[0].slice_bytes,
            "device_kind": tb.device_kind, "fleet_vms": len(tb.vms), "vcpus": tb.fleet["vcpus"],
            "memory_mib": tb.fleet["memory_mib"], "image": tb.image, **ctx.environment,
        }

    def run(self, ctx: RunContext) -> None:
        counts, skipped = self.plan(ctx)
        if skipped:
            warn(f"VM counts {skipped} skipped: the fleet has {len(ctx.testbed.vms)} VMs (raise fleet.vms)")
        ctx.store.update_manifest(planned=counts, skipped={str(n): "exceeds fleet size" for n in skipped})
        conn = libvirt.open(ctx.testbed.uri)
        try:
            total = 2 * len(counts)
            for i, n in enumerate(counts):
                for j, env in enumerate(("physical", "virtual")):
                    step(f"[{2 * i + j + 1}/{total}] {env}, {n} {'VM' if env == 'virtual' else 'host slot'}"
                         f"{'s' if n > 1 else ''}: fio {ctx.cfg.vm_scaling.job.rw} "
                         f"bs={ctx.cfg.vm_scaling.job.bs} qd={ctx.cfg.vm_scaling.job.iodepth}")
                    names = [vm.name for vm in ctx.testbed.vms[:n]] if env == "virtual" else []
                    repeats.repeat(ctx.cfg.repeat, lambda rep: self._point(ctx, conn, env, n, rep),
                                   before=lambda: repeats.drop_caches(conn, names), what=f"{env} n={n}")
        finally:
            conn.close()

    def _point(self, ctx: RunContext, conn: libvirt.virConnect, env: str, n: int, rep: int) -> float | None:
        """One repeat of one point; returns its aggregate IOPS, or None when it failed."""
        meta = {**self._metadata(ctx, env, n), "repeat": rep, "drop_caches": ctx.cfg.repeat.drop_caches}
        job = ctx.cfg.vm_scaling.job
        vms = ctx.testbed.vms[:n]
        t0 = time.monotonic()
        try:
            if env == "physical":
                procs = [fio.start_on_host(job, filename=ctx.testbed.device_path, offset=vm.slice_offset,
                                           size=vm.slice_bytes) for vm in vms]
                try:
                    raws = [fio.wait_on_host(p, job) for p in procs]
                finally:
                    for p in procs:
                        if p.poll() is None:
                            p.kill()
                            p.wait()
                names = [f"host-slot{i}" for i in range(n)]
            else:
                def one(vm):
                    agent = GuestAgent(conn.lookupByName(vm.name))
                    return fio.run_in_guest(agent, job, locator=vm.locator, size=vm.slice_bytes)
                raws = in_parallel(one, vms)
                names = [vm.name for vm in vms]
            results = []
            samples = []
            for name, raw in zip(names, raws):
                path = ctx.store.save_raw(f"{meta['point']}/{name}{'' if rep == 0 else f'.r{rep}'}.json", raw)
                r = fio.parse(raw)
                results.append(r)
                samples += [Sample(m, v, u, {**meta, "scope": "vm" if env == "virtual" else "slot",
                                             "vm": name, "raw": path, "fio_version": r.version})
                            for m, (v, u) in r.metrics().items()]
            wall = time.monotonic() - t0
            agg = aggregate.aggregate(results)
            agg_meta = {**meta, "scope": "aggregate", "vm": "", "point_wall_s": round(wall, 3),
                        "fio_version": results[0].version}
            samples += [Sample(m, v, u, agg_meta) for m, (v, u) in agg.items()]
            if env == "virtual":
                base = [s.value for s in ctx.store.samples if s.metric == "aggregate_iops" and s.status == "ok"
                        and s.metadata["point"] == f"physical-n{n}"]
                if base:  # against the mean of the physical repeats
                    samples.append(Sample("ve_pe_ratio", aggregate.ratio(agg["aggregate_iops"][0],
                                                                         sum(base) / len(base)), "ratio", agg_meta))
            ctx.store.add(samples)
            step(f"      {agg['aggregate_iops'][0]:,.0f} IOPS aggregate, {agg['iops_per_vm'][0]:,.0f} per "
                 f"{'VM' if env == 'virtual' else 'slot'}, p99 {agg['lat_p99'][0]:,.0f} us ({wall:.1f}s wall)")
            return agg["aggregate_iops"][0]
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # a failed point is recorded as failed, never as a number
            ctx.store.add([Sample("aggregate_iops", None, "IOPS", {**meta, "scope": "aggregate", "vm": ""},
                                  status="failed", error=str(e))])
            warn(f"{meta['point']} failed: {e}")
            return None

    def summarize(self, ctx: RunContext) -> None:
        rows = tables.vm_scaling_rows(ctx.store.samples)
        if not rows:
            return
        png = plots.vm_scaling(rows, ctx.store.dir / "vm-scaling.png",
                               title=f"vm-scaling: {ctx.cfg.vm_scaling.job.rw} {ctx.cfg.vm_scaling.job.bs} "
                                     f"QD{ctx.cfg.vm_scaling.job.iodepth}, {ctx.testbed.disk['backend']}, "
                                     f"accel={ctx.environment['accel']}{' (TCG: not performance numbers)' if ctx.environment['accel'] == 'tcg' else ''}")
        text = tables.print_vm_scaling(rows, accel=ctx.environment["accel"])
        write_atomic(ctx.store.dir / "summary.txt", text)
        step(f"plot: {png}")


EXPERIMENT = VmScaling()
