"""`harness run NAME --resume RUN`: which run folder goes on, and whether it may. A run goes on only
with what decided its results: the same experiment, config, harness version, host and accelerator,
unless the user accepts the change (`--resume-anyway`, which its later samples record)."""
from __future__ import annotations

import json
from pathlib import Path

from harness.common.schema import ConfigError
from harness.results.store import RunIndex, status_of

# what in the environment decides a result, beside the config
DECIDING = ("harness_rev", "host", "accel", "l0_accel", "qemu_version", "host_kernel")


# config fields that say where a run is kept, not what it measures: a run folder may move
WHERE_ONLY = ("results_dir",)


def offered(status: str, manifest: dict) -> bool:
    """Whether a run is one to go on with (what `harness runs` lists and a run's last line says):
    stopped before its end, or ended with a block whose fleet did not come up."""
    return status in ("interrupted", "died", "failed") or (bool(manifest.get("blocks_failed")) and status != "running")


def folder_of(results_dir: Path, run: str) -> Path:
    """The run folder `run` names: a run id in the results folder, or a run folder's path."""
    for candidate in (Path(run), results_dir / run, RunIndex(results_dir).find(run)):
        if candidate is not None and (candidate / "run.json").is_file():
            return candidate.resolve()
    raise ConfigError(f"--resume {run}: no run of that id in {results_dir}, and not a run folder. "
                      "Fix: give a run id that `harness runs` lists, or a run folder's path")


def recorded_config(folder: Path) -> dict:
    """The config a run began with, as its run.json keeps it."""
    return json.loads((folder / "run.json").read_text()).get("config") or {}


def refusal(folder: Path, experiment: str) -> str | None:
    """Why the run in `folder` cannot go on as `experiment` (another experiment's, still running,
    or finished), or None."""
    manifest = json.loads((folder / "run.json").read_text())
    if manifest.get("experiment") != experiment:
        return (f"--resume: {folder.name} is a run of {manifest.get('experiment')}, not of {experiment}. "
                f"Fix: harness run {manifest.get('experiment')} --resume {folder.name}")
    status = status_of(manifest)
    if status == "running":
        return f"--resume: {folder.name} is still running (owner {manifest.get('owner')}). Fix: wait for it, or stop it"
    if status == "completed":
        return f"--resume: {folder.name} completed: nothing is left to measure. Fix: start a new run"
    return None


def _flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def changes(manifest: dict, config: dict, environment: dict) -> list[str]:
    """What differs between the run as it began and as it would go on: config fields and the
    environment's deciding parts, each as `field: before -> now`. A section the run began without
    (an experiment's added to vtb since) cannot have decided anything of it, so is not compared."""
    began = manifest.get("config") or {}
    before, now = _flat(began), _flat(config)
    out = [f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in sorted(before.keys() | now.keys())
           if before.get(k) != now.get(k) and k not in WHERE_ONLY and k.split(".")[0] in began]
    env = manifest.get("environment") or {}
    out += [f"{k}: {env.get(k)!r} -> {environment.get(k)!r}" for k in DECIDING if env.get(k) != environment.get(k)]
    return out


def changed_refusal(folder: Path, changed: list[str]) -> str:
    return (f"--resume {folder.name}: what decides its results changed since it began, so its samples would "
            f"not be comparable:\n  " + "\n  ".join(changed) +
            "\nFix: run with the run's config again (its run.json keeps it), or add --resume-anyway to go on "
            "regardless (its later samples record what changed)")
