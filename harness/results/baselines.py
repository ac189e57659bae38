"""Baselines by name (`harness baseline save NAME RUN`): a run's samples and manifest, copied
into <results_dir>/baselines/NAME/, so that `harness compare NAME RUN` gates against them even
after the run folder itself is cleaned away."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

from harness.common.files import write_atomic
from harness.results.samples import read_samples

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class BaselineError(ValueError):
    pass


def folder(results_dir: Path) -> Path:
    return results_dir / "baselines"


def save(results_dir: Path, name: str, run: Path) -> Path:
    """The run's samples (and manifest) as baseline NAME, replacing an older one of that name."""
    if not NAME.fullmatch(name):
        raise BaselineError(f"baseline name {name!r}: letters, digits and . _ - (up to 64, a letter or digit "
                            "first). Fix: e.g. main or v1.2")
    samples = run / "samples.jsonl" if run.is_dir() else run
    if not samples.is_file():
        raise BaselineError(f"{run}: no samples.jsonl to keep. Fix: give a run folder or id (`harness runs`)")
    read_samples(samples)   # a file that is not a run's samples is refused here, not by a later compare
    into = folder(results_dir) / name
    # each file whole or not at all; the samples (what compare reads) last
    if run.is_dir() and (run / "run.json").is_file():
        write_atomic(into / "run.json", (run / "run.json").read_bytes())
    write_atomic(into / "baseline.json", json.dumps({"name": name, "from": str(run.resolve()),
                                                     "saved": time.time()}, indent=1))
    write_atomic(into / "samples.jsonl", samples.read_bytes())
    return into


def find(results_dir: Path, name: str) -> Path | None:
    path = folder(results_dir) / name
    return path if NAME.fullmatch(name) and (path / "samples.jsonl").is_file() else None


def listing(results_dir: Path) -> list[dict]:
    """Each baseline's name, the run it was saved from, and when."""
    out = []
    for meta in sorted(folder(results_dir).glob("*/baseline.json")):
        out.append(json.loads(meta.read_text()))
    return out
