"""Runs one experiment against the deployed testbed and keeps everything it measured."""
from __future__ import annotations

import json
import re
import shlex
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from harness import hosts
from harness.common import paths
from harness.common.bounded import heartbeat
from harness.common.cancel import CANCEL, Terminated, interrupt_in
from harness.common.console import console, step, warn
from harness.common.files import write_atomic
from harness.common.pids import owner
from harness.common.progress import RunProgress
from harness.config.core import Config, validation_context
from harness.engine import settings
from harness.experiments import RunContext, registry
from harness.fleet import gc, users_fleet
from harness.fleet.testbed import Testbed, TestbedRecord
from harness.hosts import LocalHost, accel, environment, packages
from harness.hosts.folders import state_dir_problem
from harness.libvirt.agent import in_parallel
from harness.measure import plan as plan_mod
from harness.measure import resume as resume_mod
from harness.measure import sweep
from harness.report import tables
from harness.results.store import RunStore, new_run_id, status_of


def _terminate(signum, _frame):
    raise Terminated(f"signal {signum}")


def grown(cfg: Config, need: int) -> Config:
    """The config with a fleet of `need` VMs, validated again (memory, device size)."""
    data = cfg.model_dump(mode="json", exclude_unset=True)
    data.setdefault("fleet", {})["vms"] = need
    try:
        return type(cfg).model_validate(data, context=validation_context(data))
    except ValidationError as e:
        raise settings.ConfigError(settings.describe(e) + f"\n  (the fleet was being grown to {need} VMs "
                                     "for the experiment's largest VM count; lower that count instead)") from None


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


RESERVED = {"baselines": "the baselines", "json": "the --json outputs' schemas"}


def run_id_problem(results_dir: Path, run_id: str) -> str | None:
    """Why a run id the user chose cannot name a new run folder, or None."""
    if not RUN_ID.fullmatch(run_id):
        return (f"--run-id {run_id!r} cannot name a run folder. Fix: letters, digits, '.', '_' and '-' (up to 100, "
                "a letter or digit first), e.g. push-1234")
    if run_id in RESERVED:
        return f"--run-id {run_id}: that folder of the results folder is vtb's own ({RESERVED[run_id]}). Fix: another id"
    if (Path(results_dir) / run_id).exists():
        return f"--run-id {run_id}: a run of that id is in {results_dir} already. Fix: another id, or --resume {run_id}"
    return None


def command_line() -> str:
    """The command as typed (`harness run ...`), for the run's record."""
    return " ".join(["harness", *(shlex.quote(a) for a in sys.argv[1:])])


def uses_fleet(experiment, cfg: Config) -> bool:
    """Whether the run measures on the user's fleet (vm-scaling comparing backends brings up its own)."""
    return experiment.needs_fleet(cfg) if hasattr(experiment, "needs_fleet") else experiment.uses_fleet


def configured(experiment, cfg: Config) -> Config:
    """The config as the experiment reads its own settings (vm-scaling's one backend is the
    fleet's; the full guest image where its guests need it), after its refusal of a config it
    cannot run (naming the field and the fix)."""
    if hasattr(experiment, "refusal") and (why := experiment.refusal(cfg)):
        raise settings.ConfigError(why)
    if hasattr(experiment, "guest_image") and experiment.guest_image(cfg) == "full":
        cfg = cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"image": "full"})})
    return experiment.configured(cfg) if hasattr(experiment, "configured") else cfg


def show_plan(cfg: Config, experiment_name: str, resume: str | None = None, run_id: str | None = None,
              resume_anyway: bool = False) -> None:
    """`harness run NAME --plan`: the plan and its estimate, after the refusals the run would make
    before anything is made (its run id, the resumed run's); nothing is provisioned or measured.
    With --resume, the plan is the run's, and what it measured before is said."""
    experiment = registry()[experiment_name]
    cfg = configured(experiment, cfg)
    if run_id is not None and (why := run_id_problem(cfg.results_dir, run_id)):
        raise settings.ConfigError(why)
    folder = resume_mod.folder_of(cfg.results_dir, resume) if resume else None
    if folder is not None and (why := resume_mod.refusal(folder, experiment.name)):
        raise settings.ConfigError(why)
    if uses_fleet(experiment, cfg) and hasattr(experiment, "fleet_size"):
        cfg = grown(cfg, max(experiment.fleet_size(cfg), cfg.fleet.vms))
    if folder is not None and not resume_anyway:   # the config only: the host's side is the run's to check
        manifest = json.loads((folder / "run.json").read_text())
        if changed := resume_mod.changes(manifest, json.loads(cfg.model_dump_json()), manifest.get("environment") or {}):
            raise settings.ConfigError(resume_mod.changed_refusal(folder, changed))
    plan = experiment.plan(cfg)
    console.print(plan_mod.describe(plan, plan_mod.Costs(cfg.results_dir, hosts.name_placed(cfg.placement), plan_mod.SHIPPED),
                                    cfg.repeat.precision, cfg.repeat.max_count, cfg.repeat.budget_s),
                  markup=False, highlight=False)
    if folder is not None:
        kept = {(s.metadata.get("point_id"), s.metadata.get("repeat")) for s in RunStore.reopened(folder).samples
                if s.metadata.get("repeat") != "all"}
        console.print(f"resuming {folder.name}: {len(kept)} of its {plan.point_runs} point runs were measured before "
                      f"and are kept; about {max(0, plan.point_runs - len(kept))} are left (the estimate above is "
                      "for the whole run)", markup=False, highlight=False)


@dataclass
class Reopened:
    """A resumed run's folder, claimed, with how it stood before."""
    folder: Path
    store: RunStore
    status: str
    wall_s: float


def run(cfg: Config, experiment_name: str, resume: str | None = None, resume_anyway: bool = False,
        run_id: str | None = None, last_line: Callable[[RunStore, str], None] | None = None) -> RunContext:
    """Runs the experiment in a new run folder, or goes on with the run `resume` names (its
    measured points kept, the rest measured in the original round order)."""
    t0 = time.monotonic()
    signal.signal(signal.SIGTERM, _terminate)  # a CI timeout or `kill` ends the run like Ctrl-C
    experiment = registry()[experiment_name]
    cfg = checked(experiment, cfg, resume, run_id)   # refused before anything is made
    reopened = reopen(cfg, resume, resume_anyway) if resume else None
    host_list, records = fleet_for(experiment, cfg)
    host, record = host_list[0], (records[0] if records else None)
    env = run_environment(cfg, host_list, records)
    store = reopened.store if reopened else RunStore(cfg.results_dir, run_id or new_run_id(experiment_name))
    if reopened:
        env = resumed_environment(reopened, cfg, env, resume_anyway)
    where = (f"{sum(len(r.vms) for r in records)} VM fleet on {len(records)} host(s), backend={record.disk['backend']}"
             if record else "a sweep fleet")
    step(f"run {store.run_id}: {experiment_name} on {where}, accel={env['accel']}, "
         f"{cfg.repeat.count} shuffled repeat(s) per point -> {store.dir}")
    store.update_manifest(experiment=experiment_name, config=json.loads(cfg.model_dump_json()),
                          command=store.manifest.get("command") or command_line(),   # a resumed run's first
                          testbed=asdict(record) if record else None, owner=owner(),
                          environment={k: v for k, v in env.items() if k != "resumed_anyway"},
                          **({"testbeds": [asdict(r) for r in records]} if len(records) > 1 else {}))
    # keyed as --plan keys them: the config's hosts, one without VMs too
    the_plan, costs = experiment.plan(cfg), plan_mod.Costs(cfg.results_dir, hosts.name_placed(cfg.placement), plan_mod.SHIPPED)
    ctx = RunContext(cfg=cfg, testbed=record, store=store, environment=env, host=host,
                     testbeds=records, hosts=host_list, planned=the_plan)
    for line in plan_mod.describe(the_plan, costs, cfg.repeat.precision, cfg.repeat.max_count,
                                  cfg.repeat.budget_s).splitlines():
        step(line)
    if not reopened:
        store.update_manifest(estimate_s=round(plan_mod.estimate(the_plan, costs).seconds))
    status = "running"
    try:
        status = measured(experiment, ctx, the_plan, costs, learn_from_s=None if reopened else t0)
    except (KeyboardInterrupt, Exception) as e:
        status, raised = failure(e, store)
        if raised is e:   # raised again, so that the exit status says so (130 or 143, or the error's)
            raise
        raise raised from e
    finally:
        ended(experiment, ctx, status, (reopened.wall_s if reopened else 0.0) + time.monotonic() - t0, last_line)
    return ctx


def checked(experiment, cfg: Config, resume: str | None, run_id: str | None) -> Config:
    """The config the run goes on with (the experiment's reading of it, its fleet grown to the
    largest VM count), after every refusal that needs nothing made: the experiment's, the run id's,
    the resumed run's, the state dir's."""
    cfg = configured(experiment, cfg)
    if run_id is not None and (why := run_id_problem(cfg.results_dir, run_id)):
        raise settings.ConfigError(why)
    if resume and (why := resume_mod.refusal(resume_mod.folder_of(cfg.results_dir, resume), experiment.name)):
        raise settings.ConfigError(why)
    if why := state_dir_problem(LocalHost(), str(cfg.state_dir), "state_dir"):
        raise settings.ConfigError(why)
    gc.register_state_dir(cfg.state_dir)   # what the run mounts there is found by gc after a SIGKILL
    need = experiment.fleet_size(cfg) if hasattr(experiment, "fleet_size") else 0
    deployed = Testbed.deployed_vms(cfg)
    if uses_fleet(experiment, cfg) and max(need, deployed) > cfg.fleet.vms:
        if need > max(cfg.fleet.vms, deployed):
            step(f"{experiment.name} needs {need} VMs and the fleet has {max(cfg.fleet.vms, deployed)}: "
                 f"growing the fleet to {need}")
        cfg = grown(cfg, max(need, deployed))  # a fleet grown before stays grown
    return cfg


def reopen(cfg: Config, resume: str, resume_anyway: bool) -> Reopened:
    """The resumed run, refused before the fleet is touched when its config changed (unless
    --resume-anyway), and claimed at once, so that no second --resume takes it."""
    folder = resume_mod.folder_of(cfg.results_dir, resume)
    store = RunStore.reopened(folder)
    config_changed = resume_mod.changes(store.manifest, json.loads(cfg.model_dump_json()),
                                        store.manifest.get("environment") or {})
    if config_changed and not resume_anyway:
        raise settings.ConfigError(resume_mod.changed_refusal(folder, config_changed))
    reopened = Reopened(folder, store, status_of(store.manifest), float(store.manifest.get("wall_s") or 0.0))
    store.update_manifest(status="running", owner=owner())
    return reopened


def fleet_for(experiment, cfg: Config) -> tuple[list, list[TestbedRecord]]:
    """The run's hosts, and the user's fleet on them when the experiment uses it (brought up, or
    re-provisioned where it differs from the config)."""
    fleet = users_fleet.for_config(cfg)
    if len(fleet.hosts) > 1 and not getattr(experiment, "spans_hosts", False):
        raise settings.ConfigError(f"{experiment.name} runs on one host; the config's fleet spans "
                                   f"{len(fleet.hosts)} ([[hosts]]). Fix: keep one [[hosts]] table for it, "
                                   "or run vm-scaling, which spreads its VM counts over the hosts")
    if hasattr(experiment, "host_packages"):   # its own tools' (each backend's come with its fleet)
        for host in fleet.hosts:
            packages.ensure(host, experiment.host_packages(cfg), f"harness run {experiment.name}")
    return fleet.hosts, fleet.ensure() if uses_fleet(experiment, cfg) else []


def run_environment(cfg: Config, host_list: list, records: list[TestbedRecord]) -> dict:
    """What every sample records of where it ran: the first host's, and over several hosts (a
    fleet or a sweep fleet that spans them) each host's beside it."""
    def one(i: int) -> dict:   # on every host at once: its accelerator (a first run there probes KVM) and tools
        choice = records[i].accel if records else accel.as_dict(
            accel.choose(cfg.fleet.accel, paths.IMAGE_DIR / "vmlinuz", host_list[i]))
        return environment.collect(choice, host_list[i])
    with heartbeat(f"the environment of {', '.join(h.label for h in host_list)}"):
        each = in_parallel(one, range(len(host_list)))   # a Ctrl-C or one host's failure stops the others
    env = dict(each[0])
    if len(host_list) > 1:
        env["per_host"] = {h.name: e for h, e in zip(host_list, each)}
        env["host"] = ",".join(h.name for h in host_list)
    return env


def resumed_environment(reopened: Reopened, cfg: Config, env: dict, resume_anyway: bool) -> dict:
    """The environment a resumed run goes on in: refused (the run given back as it stood) when
    the host or accelerator changed, unless --resume-anyway, which its samples then record."""
    store = reopened.store
    changed = resume_mod.changes(store.manifest, json.loads(cfg.model_dump_json()), env)
    if changed and not resume_anyway:
        store.update_manifest(status=reopened.status)
        raise settings.ConfigError(resume_mod.changed_refusal(reopened.folder, changed))
    step(f"resuming {store.run_id}: {len(store.done())} point runs measured before are kept")
    store.update_manifest(status="running", resumed=[*store.manifest.get("resumed", []),
                                                      {"at": time.time(), "changed": changed}])
    return {**env, **({"resumed_anyway": "; ".join(changed)} if changed else {})}


def measured(experiment, ctx: RunContext, the_plan: plan_mod.Plan, costs: plan_mod.Costs,
             learn_from_s: float | None) -> str:
    """The experiment run under its progress bar; its status. A whole run (not a resumed one:
    `learn_from_s` is its start; every block provisioned) teaches this host's costs."""
    with RunProgress(experiment.name) as progress:
        ctx.progress = progress
        if the_plan.point_runs:
            progress.plan(plan_mod.estimate(the_plan, costs).seconds / the_plan.point_runs)
        sweep.run_declared(ctx, experiment.measures(ctx))
    samples = ctx.store.samples
    blocks_failed = ctx.store.manifest.get("blocks_failed")
    if learn_from_s is not None and not blocks_failed:   # a block that did not come up would cheapen its setup
        costs.learn(experiment.name, *plan_mod.learnt_from(the_plan, [s.row() for s in samples],
                                                           time.monotonic() - learn_from_s, len(the_plan.blocks)),
                    shared=not the_plan.untimed)
    whole = all(s.status == "ok" for s in samples) and not blocks_failed
    return "completed" if whole else "completed-with-failures"


def failure(e: BaseException, store: RunStore) -> tuple[str, BaseException]:
    """The status an exception gives the run, and the exception to raise: Ctrl-C or SIGTERM (also
    behind a cleanup's error that took its place) interrupts it, keeping what was measured;
    anything else fails it, its error recorded."""
    stop = e if isinstance(e, KeyboardInterrupt) else interrupt_in(e)
    if stop is not None:
        CANCEL.set()
        warn("interrupted: keeping the points measured so far")
        return "interrupted", stop
    store.update_manifest(error=str(e))
    return "failed", e


def ended(experiment, ctx: RunContext, status: str, wall_s: float,
          last_line: Callable[[RunStore, str], None] | None = None) -> None:
    """Whatever the outcome: the manifest's end (the command's whole time, provisioning included,
    summed over a resumed run's sessions), the summary, and where the results are."""
    store = ctx.store
    store.update_manifest(status=status, finished=time.time(), wall_s=round(wall_s, 1))
    _summarize(experiment, ctx, replaces_nothing=status in ("completed", "completed-with-failures"))
    failed_blocks = store.manifest.get("blocks_failed") or {}
    for label, why in failed_blocks.items():
        warn(f"not measured: block {label} (its fleet did not come up: {why})")
    step(f"results: {store.dir} ({status})")
    if resume_mod.offered(status, store.manifest):
        step(f"go on with it: harness run {experiment.name} --resume {store.run_id} (it goes on with its own config)")
    if last_line:   # whatever the outcome (the command's --json: a CI job learns the run it made)
        last_line(store, status)


def _precision_summary(ctx: RunContext) -> None:
    """With a precision: which VE/PE ratios reached it, and which did not, and why (the budget or
    repeat.max_count ended first)."""
    target = ctx.cfg.repeat.precision
    ratios = [s.metadata for s in ctx.store.samples if s.metric == "ve_pe_ratio" and "precision_met" in s.metadata]
    if target is None or not ratios:
        return
    short = [m for m in ratios if not m["precision_met"]]
    title = f"precision ±{target:.0%}: {len(ratios) - len(short)} of {len(ratios)} VE/PE ratios reached it"
    lines = [f"{m['point_id']}: ±{m['ratio_ci_rel']:.0%}" if m.get("ratio_ci_rel") is not None
             else f"{m['point_id']}: no interval" for m in short]
    if short:
        ended = "the time budget" if any(m.get("budget_ended_first") for m in short) else "repeat.max_count"
        lines = [f"not reached ({ended} ended first) by:", *lines]
    console.print("\n".join([title, *lines]), markup=False)
    tables.record_text(title, lines or ["every ratio's 95% CI is within it"])


def _summarize(experiment, ctx: RunContext, replaces_nothing: bool) -> None:
    """The run's summary. When the run itself failed or was stopped, a summary that fails too is
    only reported: the run's own error is the one the user sees."""
    try:
        with tables.recorded() as shown:
            experiment.summarize(ctx)
            _precision_summary(ctx)
        if shown:   # the same tables as data, for the HTML report
            write_atomic(ctx.store.dir / "summary.json", json.dumps(shown, indent=1))
    except Exception as e:
        if replaces_nothing:
            raise
        warn(f"the summary failed as well ({type(e).__name__}: {e}); the samples are kept in {ctx.store.dir}")
