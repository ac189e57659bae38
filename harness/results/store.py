"""results/<run-id>/: raw outputs, the tidy sample table, the run manifest. Every write is atomic
(temp file + rename), so a crash or SIGKILL mid-run leaves complete files only."""
from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import time
from pathlib import Path

from harness.common.console import warn
from harness.common.files import write_atomic
from harness.common.pids import owner_alive
from harness.results.samples import Sample, read_rows


def status_of(manifest: dict) -> str:
    """The run's status, with "died" for a run that says "running" but whose owner process is gone
    (killed with SIGKILL, or the machine rebooted). Runs owned by another machine are taken at
    their word."""
    status = manifest.get("status") or ""
    who = manifest.get("owner")
    return "died" if status == "running" and who and not owner_alive(who) else status


def live_runs(results_dir: Path) -> list[str]:
    """The runs under results_dir whose process is still running."""
    return sorted(m.parent.name for m in Path(results_dir).glob("*/run.json")
                  if status_of(json.loads(m.read_text())) == "running")


def new_run_id(experiment: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{experiment}-{os.getpid()}"


class RunStore:
    """One run's folder. Samples are kept in memory and the whole table is rewritten after each
    point: small tables, and the files on disk are always whole."""

    def __init__(self, root: Path, run_id: str):
        self.run_id = run_id
        self.dir = root / run_id
        self.dir.mkdir(parents=True, exist_ok=False)
        self.samples: list[Sample] = []
        self.manifest: dict = {"run_id": run_id, "status": "running", "started": time.time()}

    @classmethod
    def reopened(cls, folder: Path) -> "RunStore":
        """A run's folder, to go on measuring in (`harness run --resume`): its manifest, and its
        measured samples. Failed samples are left out: their points are measured again."""
        store = cls.__new__(cls)
        store.run_id, store.dir = folder.name, folder
        store.manifest = json.loads((folder / "run.json").read_text())
        rows = read_rows(folder / "samples.jsonl") if (folder / "samples.jsonl").exists() else []
        store.samples = [Sample.from_row(r) for r in rows if r.get("status") == "ok"]
        return store

    def done(self) -> set[tuple[str, int]]:
        """The (point id, repeat) pairs whose samples are on disk: a point's samples are written at
        once, so one there means its repeat is complete. A facet (`<id>#<facet>`) counts for its point."""
        return {(str(s.metadata["point_id"]).split("#")[0], s.metadata["repeat"]) for s in self.samples
                if s.status == "ok" and isinstance(s.metadata.get("repeat"), int) and "point_id" in s.metadata}

    def save_raw(self, relpath: str, data: str | bytes) -> str:
        write_atomic(self.dir / "raw" / relpath, data)
        return f"raw/{relpath}"

    def add(self, samples: list[Sample]) -> None:
        """Adds samples and rewrites the table. A value derived over a point's repeats (a ratio, a
        model's expectation) replaces the one derived before from fewer (a resumed run's)."""
        derived = {_derived_key(s) for s in samples} - {None}
        if derived:
            self.samples = [s for s in self.samples if _derived_key(s) not in derived]
        self.samples.extend(samples)
        rows = [s.row() for s in self.samples]
        columns = sorted({k for r in rows for k in r})
        # every row has every column (null where a sample has no such field), so that the table loads
        # as one frame; in the CSV, nested values (dicts, lists) and booleans are JSON (true/false)
        whole = [{c: r.get(c) for c in columns} for r in rows]
        write_atomic(self.dir / "samples.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in whole))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns)
        writer.writeheader()
        writer.writerows({c: json.dumps(v) if isinstance(v, (dict, list, bool)) else v for c, v in r.items()}
                         for r in whole)
        write_atomic(self.dir / "samples.csv", buf.getvalue())

    def update_manifest(self, **fields) -> None:
        self.manifest.update(fields)
        write_atomic(self.dir / "run.json", json.dumps(self.manifest, indent=2, default=str))
        RunIndex(self.dir.parent).record(self.manifest, self.dir)


def _derived_key(s: Sample) -> tuple | None:
    return (s.metric, s.metadata.get("point_id")) if s.metadata.get("repeat") == "all" else None


class RunIndex:
    """An index of the runs in a results folder (SQLite), for `harness runs` and run-id look-ups.
    The run folders stay the source of truth: `rebuild` recreates the index from them."""

    def __init__(self, root: Path):
        self.path = root / "index.sqlite"

    def _db(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("create table if not exists runs (run_id text primary key, experiment text, status text, "
                   "started real, finished real, accel text, backend text, path text)")
        return db

    def record(self, manifest: dict, folder: Path) -> None:
        testbed = manifest.get("testbed") or {}
        row = (manifest["run_id"], manifest.get("experiment"), manifest.get("status"), manifest.get("started"),
               manifest.get("finished"), (manifest.get("environment") or {}).get("accel"),
               (testbed.get("disk") or {}).get("backend"), str(folder))
        with self._db() as db:
            db.execute("insert or replace into runs values (?, ?, ?, ?, ?, ?, ?, ?)", row)

    def rebuild(self) -> None:
        """Recreates the index from the run folders; a folder whose run.json is not a run's manifest
        (unreadable, not JSON, no run id) is left out of it, and said."""
        for manifest in sorted(self.path.parent.glob("*/run.json")):
            try:
                self.record(json.loads(manifest.read_text()), manifest.parent)
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                warn(f"{manifest}: not a run's manifest (vtb writes one with a run_id); left out of the runs index. "
                     "Fix: remove that folder, or put back the run.json the run wrote")

    def list(self) -> list[sqlite3.Row]:
        with self._db() as db:
            db.row_factory = sqlite3.Row
            return db.execute("select * from runs order by started").fetchall()

    def find(self, run_id: str) -> Path | None:
        with self._db() as db:
            hit = db.execute("select path from runs where run_id = ?", (run_id,)).fetchone()
        return Path(hit[0]) if hit else None
