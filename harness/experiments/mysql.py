"""`harness run mysql`: sysbench OLTP on MariaDB (O_DIRECT, a small buffer pool), physical against
virtual, one VM against many, sweeping one axis at a time around a base point. Config section [mysql]."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import libvirt

from harness.agent import GuestAgent, in_parallel
from harness.config import Config
from harness.console import step, warn
from harness.experiments import RunContext, repeats
from harness.report import plots, tables
from harness.samples import Sample
from harness.store import write_atomic
from harness.workloads import sysbench
from harness.workloads.sysbench import DbPoint


@dataclass(frozen=True)
class Planned:
    axis: str           # the swept axis this point belongs to ("base" for the base point)
    point: DbPoint
    vm_count: int

    @property
    def name(self) -> str:
        return f"{self.point.label()}-n{self.vm_count}"


AXES = {"tests": "test", "threads": "threads", "page_sizes": "page_size",
        "buffer_pool_fractions": "buffer_pool_fraction", "compression": "key_block_size"}


def plan(cfg: Config, fleet_size: int) -> tuple[list[Planned], dict[str, str]]:
    c = cfg.mysql
    base = DbPoint(test=c.tests[0], threads=c.threads[0], page_size=c.page_sizes[0],
                   buffer_pool_fraction=c.buffer_pool_fractions[0], key_block_size=c.compression[0],
                   tables=c.tables, table_size=c.table_size, runtime_s=c.runtime_s, filesystem=c.filesystem)
    n0 = c.vm_counts[0]
    planned = [Planned("base", base, n0)]
    for axis, field in AXES.items():
        planned += [Planned(axis, replace(base, **{field: v}), n0) for v in getattr(c, axis)[1:]]
    planned += [Planned("vm_counts", base, n) for n in c.vm_counts[1:]]
    skipped = {p.name: f"needs {p.vm_count} VMs, the fleet has {fleet_size} (raise fleet.vms)"
               for p in planned if p.vm_count > fleet_size}
    return [p for p in planned if p.vm_count <= fleet_size], skipped


class Mysql:
    name = "mysql"
    uses_fleet = True
    host_kinds = ("local",)  # the host MariaDB runs on this machine (not yet through harness.hosts)

    def run(self, ctx: RunContext) -> None:
        planned, skipped = plan(ctx.cfg, len(ctx.testbed.vms))
        for name, reason in skipped.items():
            warn(f"{name} skipped: {reason}")
        ctx.store.update_manifest(planned=[p.name for p in planned], skipped=skipped)
        conn = libvirt.open(ctx.testbed.uri)
        try:
            for i, p in enumerate(planned):
                for env in ("physical", "virtual"):
                    step(f"[{i + 1}/{len(planned)}] {env} {p.name} ({p.axis})")
                    guests = [vm.name for vm in ctx.testbed.vms[:p.vm_count]] if env == "virtual" else []
                    repeats.repeat(ctx.cfg.repeat, lambda rep: self._point(ctx, conn, p, env, rep),
                                   before=lambda: repeats.drop_caches(conn, guests), what=p.name)
        finally:
            conn.close()

    def _point(self, ctx: RunContext, conn, p: Planned, env: str, rep: int) -> float | None:
        """One repeat of a point; returns its aggregate TPS, or None when it failed."""
        tb = ctx.testbed
        vms = tb.vms[:p.vm_count]
        meta = {"run_id": ctx.store.run_id, "experiment": self.name, "env": env, "axis": p.axis,
                "point": p.name, "vm_count": p.vm_count, **tb.disk, **p.point.metadata(),
                "data_size_bytes": vms[0].slice_bytes, "device_kind": tb.device_kind, "image": tb.image,
                "repeat": rep, "drop_caches": ctx.cfg.repeat.drop_caches, **ctx.environment}
        t0 = time.monotonic()
        names = [vm.name for vm in vms] if env == "virtual" else [f"host-slot{i}" for i in range(p.vm_count)]
        try:
            if env == "virtual":
                def one(vm):
                    return sysbench.run_in_guest(GuestAgent(conn.lookupByName(vm.name)), p.point, locator=vm.locator)
                runs = in_parallel(one, vms)
            else:
                fleet_dir = ctx.cfg.state_dir / ctx.cfg.fleet.name
                runs = sysbench.run_all_on_host(p.point, [
                    {"device": tb.device_path, "offset": vm.slice_offset, "size": vm.slice_bytes,
                     "mount": str(fleet_dir / f"{tb.prefix}-db{i}")} for i, vm in enumerate(vms)])
            samples, results = [], []
            for who, run in zip(names, runs):
                raw = self._keep(ctx, p, who + ("" if rep == 0 else f".r{rep}"), run.raw, run.server_config,
                                 run.server_log)
                r = sysbench.parse(run.raw)
                results.append(r)
                samples += [Sample(m, v, u, {**meta, "scope": "vm" if env == "virtual" else "slot", "vm": who,
                                             "raw": raw}) for m, (v, u) in r.metrics().items()]
            agg = {"aggregate_tps": (sum(r.tps for r in results), "tx/s"),
                   "aggregate_qps": (sum(r.qps for r in results), "q/s"),
                   "tps_per_vm": (sum(r.tps for r in results) / len(results), "tx/s"),
                   "lat_avg": (sum(r.lat_avg_ms for r in results) / len(results), "ms"),
                   "lat_p95": (sum(r.lat_p95_ms for r in results) / len(results), "ms")}
            agg_meta = {**meta, "scope": "aggregate", "vm": "", "point_wall_s": round(time.monotonic() - t0, 3)}
            samples += [Sample(m, v, u, agg_meta) for m, (v, u) in agg.items()]
            if env == "virtual":
                base = [s.value for s in ctx.store.samples if s.metric == "aggregate_tps" and s.status == "ok"
                        and s.metadata["env"] == "physical" and s.metadata["point"] == p.name]
                if base and sum(base) > 0:  # against the mean of the physical repeats
                    samples.append(Sample("ve_pe_ratio", agg["aggregate_tps"][0] / (sum(base) / len(base)), "ratio",
                                          agg_meta))
            ctx.store.add(samples)
            step(f"      {agg['aggregate_tps'][0]:,.1f} TPS aggregate, p95 {agg['lat_p95'][0]:,.1f} ms")
            return agg["aggregate_tps"][0]
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # recorded as failed, with the server's log, never as a number
            log = getattr(e, "server_log", "")
            raw = self._keep(ctx, p, f"{env}-failed", "", getattr(e, "server_config", ""), log) if log else ""
            ctx.store.add([Sample("aggregate_tps", None, "tx/s", {**meta, "scope": "aggregate", "vm": "",
                                                                   "raw": raw}, status="failed", error=str(e))])
            warn(f"{env} {p.name} failed: {e}")
            return None

    @staticmethod
    def _keep(ctx: RunContext, p: Planned, who: str, raw: str, config: str, log: str) -> str:
        path = ctx.store.save_raw(f"{p.name}/{who}.sysbench.txt", raw) if raw else ""
        ctx.store.save_raw(f"{p.name}/{who}.server.cnf", config)
        ctx.store.save_raw(f"{p.name}/{who}.server.log", log)
        return path or f"raw/{p.name}/{who}.server.log"

    def summarize(self, ctx: RunContext) -> None:
        rows = tables.mysql_rows(ctx.store.samples)
        if not rows:
            return
        accel = ctx.environment["accel"]
        for axis in sorted({r["axis"] for r in rows} - {"base"}):
            png = plots.mysql_axis(rows, axis, ctx.store.dir / f"mysql-{axis}.png",
                                   title=f"sysbench TPS by {axis} (accel={accel}"
                                         f"{', not performance numbers' if accel == 'tcg' else ''})")
            step(f"plot: {png}")
        write_atomic(ctx.store.dir / "summary.txt", tables.print_mysql(rows, accel))


EXPERIMENT = Mysql()
