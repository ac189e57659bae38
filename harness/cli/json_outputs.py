"""The shapes of the commands' `--json` outputs. Each command prints its JSON through these models,
and their JSON Schemas (`harness results schema --of NAME`, results/json/) are generated
from them: what a script reads is what the schema says."""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RunStatus = Literal["running", "completed", "completed-with-failures", "interrupted", "failed", "died", ""]


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListedRun(_Output):
    """One run of `harness runs --json` (a list of these, oldest first)."""
    run_id: str
    experiment: str | None = Field(description="the experiment's name")
    status: RunStatus = Field(description="`died`: it says running, but its process is gone")
    started: float | None = Field(description="epoch seconds")
    finished: float | None = Field(description="epoch seconds, once it ended")
    accel: str | None = Field(description="kvm or tcg, as its environment recorded")
    backend: str | None = Field(description="the fleet's disk backend, where it used one")
    path: str = Field(description="its folder")


class _Point(_Output):
    """A point as compare pairs it."""
    experiment: str
    group: str
    point: str
    backend: str
    env: str = Field(description="physical, virtual, or empty")


class LostPoint(_Point):
    """A point the baseline (A) measured that the run under test (B) did not."""
    why: str = Field(description="`failed in B: <its error>`, or `not in B`")


class Change(_Point):
    """One compared metric of one point."""
    metric: str
    a: list[float] = Field(description="A's values over its repeats")
    b: list[float] = Field(description="B's values over its repeats")
    change: float = Field(description="B over A, minus 1 (geometric means where tested)")
    ci95: list[float] | None = Field(description="the change's 95% CI [low, high]; null with one value a side")
    p: float | None = Field(description="Welch's t-test on log values, Holm-adjusted; null when not tested")
    regression: bool
    improvement: bool


class Comparison(_Output):
    """`harness compare A B --json`. Exit 1 with a regression, 3 with a lost point (unless allowed)."""
    a: str
    b: str
    a_folder: str
    b_folder: str
    alpha: float
    min_change: float = Field(description="a fraction: 0.05 is 5%")
    unpaired: int = Field(description="metrics in only one of the two runs")
    regressions: int
    lost: list[LostPoint]
    changes: list[Change]


class TrendPoint(_Output):
    """One run's figure at one point, of `harness trend METRIC --json` (a list of these, oldest first)."""
    run_id: str
    point: str = Field(description="experiment, group/point and where it ran")
    metric: str
    n: int = Field(description="repeats")
    mean: float
    ci95: float | None = Field(description="the 95% CI's half-width; null for one repeat")
    cv: float | None = Field(description="coefficient of variation over the repeats; null for one repeat")


class Baseline(_Output):
    """One baseline of `harness baseline list --json` (a list of these)."""
    name: str
    from_: str = Field(alias="from", description="the run folder it was saved from")
    saved: float = Field(description="epoch seconds")


class RunOutcome(_Output):
    """The last line of `harness run NAME --json`, whatever the outcome."""
    run_id: str
    folder: str
    status: RunStatus
    failed_samples: int
    failed_blocks: list[str] = Field(description="blocks whose fleet did not come up")


# name -> (model, whether the output is a list of it)
OUTPUTS: dict[str, tuple[type[_Output], bool]] = {
    "runs": (ListedRun, True), "compare": (Comparison, False), "trend": (TrendPoint, True),
    "baseline-list": (Baseline, True), "run": (RunOutcome, False)}


def schema(name: str) -> dict:
    """The JSON Schema (2020-12) of one command's --json output."""
    model, many = OUTPUTS[name]
    one = model.model_json_schema(by_alias=True)
    if not many:
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **one}
    defs = one.pop("$defs", {})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"harness {name} --json",
            "type": "array", "items": {"$ref": f"#/$defs/{model.__name__}"}, "$defs": {**defs, model.__name__: one}}


def dumps(name: str, data, indent: int | None = 1) -> str:
    """`data` checked against its command's model, as JSON (a model's error is a vtb bug: exit 70)."""
    model, many = OUTPUTS[name]
    checked = [model.model_validate(d).model_dump(by_alias=True) for d in data] if many else \
        model.model_validate(data).model_dump(by_alias=True)
    return json.dumps(checked, indent=indent)
