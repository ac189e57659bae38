"""`harness run tuning --backend B`: which settings of one backend, on the backends matrix's
workloads. The knobs are the backend's own (`Backend.knobs`, declared in its module: this module
knows none by name), each with the values it declares; `--knob FIELD=V1,V2` chooses knobs and
values. By default one knob at a time around the configured disk (each value a block on a fleet
of its own, its host baseline in the block's shuffled rounds); `--full` every combination.

A configuration QEMU would refuse (native AIO without O_DIRECT, an AIO engine its build lacks) is
refused in the plan, with QEMU's own words and the fix, before anything starts: each is judged
by the config's own validation and, on this machine, by QEMU itself on the block node the
backend renders. Config section [tuning]."""
from __future__ import annotations

import itertools
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from harness import backends, hosts
from harness.backends.base import VmSlot, file_blockdev
from harness.common.schema import Refusal, Section
from harness.config.core import Config
from harness.experiments import Flag, RunContext, registry, tuning_answer
from harness.experiments.fio_matrix import FioPoint
from harness.measure import sweep
from harness.measure.declaration import Declared, DeclaredBlock, plan_of
from harness.measure.plan import Plan

GROUP, DEFAULT = tuning_answer.GROUP, tuning_answer.DEFAULT
QEMU_PROBE_S = 20


class Settings(Section):
    backend: str = Field("virtio-blk", description="the backend whose settings are tuned (one with knobs: "
                                                    "`harness backend list`)")
    knobs: list[str] = Field([], description="knobs and the values to try, each FIELD=V1,V2 (--knob aio=native,io_uring "
                                             "--knob iothreads=0,1); empty = every knob the backend declares, with its values")
    full: bool = Field(False, description="every combination of the knobs' values (a full factorial), instead of "
                                          "one knob at a time around the configured disk")
    workloads: list[str] = Field(["randread-qd1", "randread-j4-qd64", "write-128k-j4"], min_length=1,
                                 description="the backends matrix's points measured in each configuration "
                                             "(`harness run backends --plan` lists them)")
    runtime_s: int = Field(6, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(1, ge=0, le=3600, description="unmeasured warm-up seconds per point")

    @field_validator("backend")
    @classmethod
    def _tunable(cls, name: str) -> str:
        try:
            backend = backends.get(name)
        except ValueError as e:
            raise ValueError(str(e)) from None
        if not backend.knobs:
            tunable = ", ".join(n for n, b in backends.all_backends().items() if b.knobs)
            raise ValueError(f"{name} declares no knobs to tune; choose one that does: {tunable}")
        return name

    @field_validator("knobs")
    @classmethod
    def _field_equals_values(cls, given: list[str]) -> list[str]:
        for entry in given:
            field, _, values = entry.partition("=")
            if not field or not values or "" in values.split(","):
                raise ValueError(f"{entry!r} is not FIELD=V1,V2 (e.g. aio=native,io_uring)")
        return given

    def chosen(self) -> dict[str, list[str]]:
        """{knob: values} as --knob gave them (a knob given twice: its values together)."""
        out: dict[str, list[str]] = {}
        for entry in self.knobs:
            field, _, values = entry.partition("=")
            out.setdefault(field.strip(), []).extend(v.strip() for v in values.split(","))
        return out


@dataclass(frozen=True)
class Configuration:
    """The backend's disk with these knobs set apart from the configured one (none: the default)."""
    changes: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.changes) or DEFAULT

    def disk(self, base: dict) -> dict:
        return {**base, **dict(self.changes)}


def knob_values(backend: backends.Backend, chosen: dict[str, list[str]]) -> dict[str, tuple]:
    """The knobs the design varies, by field: the backend's own with their values, or those chosen
    (each value read as the knob's own values are typed). Raises ValueError naming an unknown knob
    or value, and the fix."""
    own = {k.field: k for k in backend.knobs}
    if not chosen:
        return {f: k.values for f, k in own.items()}
    out = {}
    for field, values in chosen.items():
        if field not in own:
            raise ValueError(f"tuning.knobs: {backend.name} has no knob {field!r}; its knobs: {', '.join(own)}")
        typed = {str(v): v for v in own[field].values}
        if unknown := [v for v in values if v not in typed]:
            raise ValueError(f"tuning.knobs: {field}={','.join(unknown)} is not a value {backend.name} tries; "
                             f"choose from {','.join(typed)}")
        out[field] = tuple(dict.fromkeys(typed[v] for v in values))
    return out


def one_at_a_time(base: dict, knobs: dict[str, tuple]) -> list[Configuration]:
    """The configured disk, then each knob's other values with the rest as configured."""
    return [Configuration()] + [Configuration(((field, v),)) for field, values in knobs.items()
                                for v in values if v != base.get(field)]


def factorial(base: dict, knobs: dict[str, tuple]) -> list[Configuration]:
    """Every combination of the knobs' values (the configured disk first, where it is one of them)."""
    found = [Configuration(tuple((f, v) for f, v in zip(knobs, combo) if v != base.get(f)))
             for combo in itertools.product(*knobs.values())]
    return sorted(dict.fromkeys(found), key=lambda c: c.changes != ())


def design(cfg: Config) -> tuple[list[Configuration], dict[str, str]]:
    """The configurations the run measures, and each refused one with why (the config's own
    validation: the knob and the fix)."""
    c = cfg.tuning
    backend = backends.get(c.backend)
    disk = cfg.disk.with_backend(c.backend)
    base = disk.model_dump()
    knobs = knob_values(backend, c.chosen())
    made = (factorial if c.full else one_at_a_time)(base, knobs)
    kept, refused = [], {}
    for conf in made:
        try:
            validated_disk(cfg, conf)
        except ValidationError as e:
            said = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
            refused[conf.label] = said if c.full else (
                f"{said}. In this study: give the other knob too, with --knob for each and --full (every "
                "combination), e.g. --knob aio=io_uring --knob cache=writeback --full")
            continue
        kept.append(conf)
    return kept, refused


def validated_disk(cfg: Config, conf: Configuration):
    """The backend's [disk] with the configuration's knobs, as the config's own validation reads it
    (raises ValidationError naming the knob and the fix)."""
    disk = cfg.disk.with_backend(cfg.tuning.backend)
    return type(disk).model_validate(conf.disk(disk.model_dump(exclude_unset=True) | {"backend": cfg.tuning.backend}))


def configurations(cfg: Config, on_this_machine: bool) -> tuple[list[Configuration], dict[str, str]]:
    """The design's configurations less those this machine's QEMU refuses on the block node the
    backend renders (judged only where the fleet is this machine's), and every refused one with why:
    the plan and the run both take theirs from here."""
    kept, refused = design(cfg)
    if on_this_machine:
        base = cfg.disk.with_backend(cfg.tuning.backend).model_dump()
        judged = {conf: qemu_refusal(conf.disk(base), cfg.state_dir) for conf in kept}
        refused |= {conf.label: why for conf, why in judged.items() if why}
        kept = [conf for conf in kept if not judged[conf]]
    return kept, refused


def qemu_refusal(disk: dict, folder: Path) -> str | None:
    """Why this machine's QEMU refuses the disk's block node as the backend renders it (its AIO
    engine, O_DIRECT), in QEMU's own words, or None: on a file in `folder` (the state dir, where
    fleets keep their disks; not /tmp, a tmpfs that may refuse O_DIRECT)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(prefix="vtb-tuning-probe-", dir=folder) as f:
        f.truncate(1 << 20)
        vm = VmSlot(0, "probe", 0, 1 << 20)
        args = [a for spec in file_blockdev("probe", f.name, disk["cache"], disk["aio"], vm) for a in ("-blockdev", spec)]
        try:
            done = subprocess.run(["qemu-system-x86_64", "-machine", "none", "-nodefaults", "-display", "none", "-S",
                                   *args, "-qmp", "stdio"], input=b'{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n',
                                  capture_output=True, timeout=QEMU_PROBE_S, check=False)
        except subprocess.TimeoutExpired:
            return f"QEMU did not answer within {QEMU_PROBE_S} s"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return said[-1].split(": ", 2)[-1] if said else f"QEMU exited {done.returncode}"


def points(cfg: Config) -> list[FioPoint]:
    """The chosen workloads of the backends matrix, for this experiment's runtime and ramp."""
    c = cfg.tuning
    found = {p.label: p for p in registry()["backends"].points(cfg)}
    if unknown := [w for w in c.workloads if w not in found]:
        raise ValueError(f"tuning.workloads: no point {', '.join(unknown)} in the backends matrix; choose from "
                         f"{', '.join(found)}")
    return [replace(found[w], group=GROUP, job=found[w].job.model_copy(update={"runtime_s": c.runtime_s,
                                                                              "ramp_s": c.ramp_s}))
            for w in c.workloads]


def point_ids(p: FioPoint, conf: Configuration) -> tuple[str, str]:
    return f"{GROUP}/{p.label}/host@{conf.label}", f"{GROUP}/{p.label}/{conf.label}"


class Tuning:
    question = "Which settings of a backend: each knob against the configured disk and the host"
    name = section = GROUP
    Settings = Settings
    headline = "iops"
    uses_fleet = False
    flags = (Flag("--backend", ("tuning.backend",), "The backend whose settings are tuned."),
             Flag("--knob", ("tuning.knobs",), "A knob and the values to try, FIELD=V1,V2; again for another knob "
                  "(default: every knob the backend declares).", repeatable=True),
             Flag("--full", ("tuning.full",), "Every combination of the knobs' values.", switch=True),
             Flag("--runtime", ("tuning.runtime_s",)), Flag("--ramp", ("tuning.ramp_s",)))

    def refusal(self, cfg: Config) -> str | None:
        try:
            points(cfg)
            kept, refused = design(cfg)
        except ValueError as e:
            return str(e)
        if len(kept) < 2:
            return ("tuning: no configuration to compare with the configured disk"
                    + (f" ({'; '.join(f'{k}: {v}' for k, v in refused.items())})" if refused else "")
                    + ". Fix: choose other values with --knob FIELD=V1,V2")
        return None

    def declared(self, cfg: Config, conf: Configuration) -> DeclaredBlock[FioPoint]:
        return DeclaredBlock(f"{cfg.tuning.backend} {conf.label}",
                             tuple(Declared(p.label, p, p.tool.tool_seconds(p.job)) for p in points(cfg)))

    def plan(self, cfg: Config) -> Plan:
        kept, refused = configurations(cfg, hosts.this_machine_for(cfg.placement) is not None)
        return plan_of(self.name, [self.declared(cfg, conf) for conf in kept], cfg.repeat.count,
                       {f"{cfg.tuning.backend} {label}": why for label, why in refused.items()})

    def measures(self, ctx: RunContext) -> sweep.Sweep:
        c = ctx.cfg.tuning
        sweep_cfg = sweep.fleet_config(ctx.cfg, "tu", vms=1)
        kept, refused = configurations(ctx.cfg, ctx.host.is_this_machine)
        if len(kept) < 2 or kept[0].label != DEFAULT:
            raise Refusal(f"tuning: this machine's QEMU leaves nothing to compare with the configured {c.backend}: "
                          + "; ".join(f"{label}: {why}" for label, why in refused.items())
                          + ". Fix: choose other values with --knob FIELD=V1,V2, or another [disk] to start from")
        planned = {"backend": c.backend, "configurations": [conf.label for conf in kept],
                   "points": [p.label for p in points(ctx.cfg)]}
        return sweep.Sweep(sweep_cfg, [self.block(ctx, sweep_cfg, conf) for conf in kept], "the tuning fleet", planned,
                           {f"{c.backend} {label}": why for label, why in refused.items()})

    def block(self, ctx: RunContext, sweep_cfg: Config, conf: Configuration) -> sweep.SweepBlock:
        """One configuration: the tuning fleet's VM served with it, the host's points beside it."""
        disk = validated_disk(sweep_cfg, conf)
        return sweep.SweepBlock(f"{ctx.cfg.tuning.backend} {conf.label}",
                                fleet=sweep.Fleet(sweep_cfg.model_copy(update={"disk": disk})),
                                points=lambda record, tb: self.block_points(ctx, record, tb, conf))

    def block_points(self, ctx: RunContext, record, tb, conf: Configuration) -> list:
        """The configuration's points, and its domain XML kept with the run (the answer's, if it wins)."""
        plan, backend = tb.plan(), backends.get(record.disk["backend"])
        attached = backend.attach(plan, plan.vms[0])
        ctx.store.save_raw(f"{GROUP}/{conf.label}.xml", domain_snippet(attached.devices_xml, attached.domain_xml))
        if command := backend.host_command(plan):
            ctx.store.save_raw(f"{GROUP}/{conf.label}.host-command", shlex.join(command) + "\n")
        return self.declared(ctx.cfg, conf).made(lambda d, env: self.point(ctx, record, d.what, env, conf))

    def point(self, ctx: RunContext, record, p: FioPoint, env: str, conf: Configuration):
        vms = record.vms[:1]
        meta = {"group": GROUP, "point": p.label, "block": conf.label, "choice": conf.label, "workload": p.label,
                **p.tool.job_meta(p.job)}
        return sweep.point_in(env, p.label,
                              partial(p.tool.on_host, ctx.host, p.job, device=record.device_path,
                                      slots=[(vm.slice_offset, vm.slice_bytes) for vm in vms]),
                              (record.disk["backend"], tuple(vm.name for vm in vms),
                               partial(p.tool.in_guests, record.uri, p.job, vms)),
                              ids=point_ids(p, conf), parse=p.parse, headline=p.headline, meta=meta)

    def summarize(self, ctx: RunContext) -> None:
        tuning_answer.report(ctx)


IN_DOMAIN, IN_DEVICES = "<!-- in <domain> -->", "<!-- in <devices> -->"


def domain_snippet(devices_xml: str, domain_xml: str) -> str:
    """The parts of a libvirt domain the configuration sets, ready to paste: what the domain adds
    (its iothreads), and the data disk with its <driver>."""
    return (f"{IN_DOMAIN}\n{domain_xml}\n" if domain_xml else "") + f"{IN_DEVICES}\n{devices_xml}\n"


EXPERIMENT = Tuning()
