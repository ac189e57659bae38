"""The engine behind latency, iops, bandwidth and backends: a list of fio points run once on the
host (the physical baseline) and once per backend in a VM, all on the same host device.

It brings up a sweep fleet of its own (vtb-sw-<fleet>-*, one VM), re-provisions it for each
backend (the device stays), and tears it down at the end, so the user's fleet is untouched.
Backends that cannot run here are listed with their reason, never silently dropped.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import libvirt

from harness import config
from harness.agent import GuestAgent
from harness.config import Config, FioJobConfig
from harness.console import step, warn
from harness.experiments import RunContext, repeats
from harness.report import plots, tables
from harness.samples import Sample
from harness.store import write_atomic
from harness.testbed import Testbed, TestbedRecord
from harness.workloads import fio


@dataclass(frozen=True)
class Point:
    group: str          # latency | iops | bandwidth
    label: str          # e.g. randread-qd1, randread-j4-qd64, read-128k
    job: FioJobConfig
    headline: str       # the metric this group is about
    lower_is_better: bool


def latency_points(cfg: Config) -> list[Point]:
    c = cfg.latency
    return [Point("latency", f"{rw}-qd1", c.job(rw=rw, bs=c.bs, iodepth=1, numjobs=1), "lat_mean", True)
            for rw in c.patterns]


def iops_points(cfg: Config) -> list[Point]:
    c = cfg.iops
    return [Point("iops", f"{c.rw}-j{j}-qd{qd}", c.job(rw=c.rw, bs=c.bs, iodepth=qd, numjobs=j), "iops", False)
            for j in c.numjobs for qd in c.iodepth]


def bandwidth_points(cfg: Config) -> list[Point]:
    c = cfg.bandwidth
    return [Point("bandwidth", f"{rw}-{c.bs}-j{c.numjobs}",
                  c.job(rw=rw, bs=c.bs, iodepth=c.iodepth, numjobs=c.numjobs), "bw", False)
            for rw in c.patterns]


GROUPS = {"latency": latency_points, "iops": iops_points, "bandwidth": bandwidth_points}


def sweep_config(cfg: Config) -> Config:
    name = f"sw-{cfg.fleet.name}"[:20]
    return cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"name": name, "vms": 1})})


class FioMatrix:
    uses_fleet = False
    host_kinds = ("local",)  # host fio and backends run on this machine (not yet through harness.hosts)
    groups: tuple[str, ...] = ()
    name = ""

    def backend_names(self, cfg: Config) -> list[str]:
        return getattr(cfg, self.groups[0]).backends or [cfg.disk.backend]

    def points(self, cfg: Config) -> list[Point]:
        return [p for g in self.groups for p in GROUPS[g](cfg)]

    def _verdicts(self, tb: Testbed, names: list[str]) -> dict[str, str | None]:
        verdicts = {}
        for name in names:
            try:
                verdicts[name] = tb.for_backend(name).backend_verdict()
            except config.ConfigError as e:
                verdicts[name] = str(e)
        return verdicts

    def run(self, ctx: RunContext) -> None:
        tb = Testbed(sweep_config(ctx.cfg))
        verdicts = self._verdicts(tb, self.backend_names(ctx.cfg))
        skipped = {b: r for b, r in verdicts.items() if r}
        runnable = [b for b, r in verdicts.items() if not r]
        for b, reason in skipped.items():
            warn(f"backend {b} skipped: {reason}")
        points = self.points(ctx.cfg)
        ctx.store.update_manifest(skipped={f"backend {b}": r for b, r in skipped.items()},
                                  planned={"backends": runnable, "points": [p.label for p in points]})
        if not runnable:
            return
        tb.down(quiet=True)  # a sweep fleet left by a killed run
        try:
            record = tb.for_backend(runnable[0]).up()
            self.sweep(ctx, lambda p: self._repeated(ctx, record, p, None, None), "physical")
            conn = libvirt.open(record.uri)
            try:
                for b in runnable:
                    step(f"backend {b}: provisioning the sweep VM")
                    record = tb.for_backend(b).up()
                    self.sweep(ctx, lambda p: self._repeated(ctx, record, p, b, conn), b)
            finally:
                conn.close()
        finally:
            step("tearing down the sweep fleet")
            tb.down(quiet=True)

    def sweep(self, ctx: RunContext, measure, who: str) -> None:
        """Measures this experiment's points in one environment; measure(point) returns the mean
        headline value, or None when the point failed."""
        points = self.points(ctx.cfg)
        for i, p in enumerate(points):
            step(f"[{who} {i + 1}/{len(points)}] {p.label}")
            measure(p)

    def _repeated(self, ctx: RunContext, record: TestbedRecord, p: Point, backend: str | None,
                  conn: libvirt.virConnect | None) -> float | None:
        guests = [record.vms[0].name] if backend else []
        values = repeats.repeat(ctx.cfg.repeat, lambda rep: self._measure(ctx, record, p, backend, conn, rep),
                                before=lambda: repeats.drop_caches(conn, guests), what=p.label)
        return sum(values) / len(values) if values else None

    def _measure(self, ctx: RunContext, record: TestbedRecord, p: Point, backend: str | None,
                 conn: libvirt.virConnect | None, rep: int) -> float | None:
        """One repeat of a point; returns its headline value, or None when it failed."""
        vm = record.vms[0]
        env = "virtual" if backend else "physical"
        disk_meta = record.disk if backend else {"backend": "host", "cache": "n/a", "aio": "n/a",
                                                 "iothreads": "n/a", "num_queues": "n/a"}
        meta = {"run_id": ctx.store.run_id, "experiment": self.name, "group": p.group, "point": p.label,
                "env": env, "vm_count": 1 if backend else 0, "scope": "vm" if backend else "slot",
                "vm": vm.name if backend else "host-slot0", **disk_meta, "rw": p.job.rw, "bs": p.job.bs,
                "iodepth": p.job.iodepth, "numjobs": p.job.numjobs, "ioengine": p.job.ioengine,
                "rate_iops": p.job.rate_iops,
                "direct": p.job.direct, "runtime_s": p.job.runtime_s, "ramp_s": p.job.ramp_s,
                "data_size_bytes": vm.slice_bytes, "device_kind": record.device_kind, "image": record.image,
                "repeat": rep, "drop_caches": ctx.cfg.repeat.drop_caches, **ctx.environment}
        t0 = time.monotonic()
        try:
            if backend:
                raw = fio.run_in_guest(GuestAgent(conn.lookupByName(vm.name)), p.job, locator=vm.locator,
                                       size=vm.slice_bytes)
            else:
                raw = fio.wait_on_host(fio.start_on_host(p.job, filename=record.device_path, offset=vm.slice_offset,
                                                         size=vm.slice_bytes), p.job)
            path = ctx.store.save_raw(f"{p.group}/{p.label}/{disk_meta['backend']}{'' if rep == 0 else f'.r{rep}'}.json",
                                      raw)
            r = fio.parse(raw)
            meta = {**meta, "raw": path, "fio_version": r.version, "point_wall_s": round(time.monotonic() - t0, 3)}
            samples = [Sample(m, v, u, meta) for m, (v, u) in r.metrics().items()]
            if backend:
                base = [s.value for s in ctx.store.samples if s.metric == p.headline and s.status == "ok"
                        and s.metadata["env"] == "physical" and s.metadata["point"] == p.label
                        and s.metadata["group"] == p.group]
                if base:  # against the mean of the physical repeats
                    samples.append(Sample("ve_pe_ratio", r.metrics()[p.headline][0] / (sum(base) / len(base)),
                                          "ratio", {**meta, "ratio_of": p.headline}))
            ctx.store.add(samples)
            v, unit = r.metrics()[p.headline]
            step(f"      {p.headline} {v:,.1f} {unit}, p99 {r.lat_p99_us:,.0f} us")
            return v
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # recorded as failed, never as a number
            ctx.store.add([Sample(p.headline, None, "", meta, status="failed", error=str(e))])
            warn(f"{disk_meta['backend']} {p.label} failed: {e}")
            return None

    def summarize(self, ctx: RunContext) -> None:
        text = ""
        for group in self.groups:
            rows = tables.matrix_rows(ctx.store.samples, group)
            if not rows:
                continue
            headline = GROUPS[group](ctx.cfg)[0].headline
            png = plots.backends_bars(rows, ctx.store.dir / f"{group}.png", metric=headline,
                                      title=f"{group}: {headline}, host against backends (accel="
                                            f"{ctx.environment['accel']}{', not performance numbers' if ctx.environment['accel'] == 'tcg' else ''})")
            text += tables.print_matrix(rows, group, headline, accel=ctx.environment["accel"])
            step(f"plot: {png}")
        if text:
            write_atomic(ctx.store.dir / "summary.txt", text)
