"""A regression model over a run's swept factors (as the cluster study did): per metric,
least squares of log(metric) on log(numeric factors) plus one-hot categorical factors. Reports
R², a leave-one-out held-out error, predicts unmeasured points and flags measured points far
from the model's prediction (anomalies)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.common.schema import bs_bytes

NUMERIC = ("vm_count", "iodepth", "numjobs", "bs_bytes", "rate_iops", "db_threads", "db_buffer_pool_fraction",
           "ceph_nodes")
CATEGORICAL = ("env", "backend", "rw", "db_test", "db_page_size", "link")  # env first: kept when backend only repeats it


def observations(rows: list[dict], metric: str) -> list[dict]:
    """The rows of one metric as factor dicts with the measured value under 'y'."""
    out = []
    for r in rows:
        if r.get("metric") != metric or r.get("status") != "ok" or not r.get("value") or r["value"] <= 0:
            continue
        if r.get("scope") not in ("aggregate", None) and r.get("group") is None:
            continue  # per-VM rows of multi-VM points: the aggregate row speaks for the point
        f = {k: r[k] for k in NUMERIC + CATEGORICAL if r.get(k) not in (None, "", "n/a")}
        if r.get("bs") is not None:
            f["bs_bytes"] = bs_bytes(r["bs"])
        out.append({**f, "y": float(r["value"])})
    return out


@dataclass
class Model:
    metric: str
    numeric: list[str]
    levels: dict[str, list[str]]      # categorical factor -> its levels (the first is the reference)
    coef: np.ndarray
    r2: float
    loo_mape: float | None            # leave-one-out mean absolute percentage error
    resid_sd: float                   # of log residuals

    def _row(self, f: dict) -> list[float]:
        x = [1.0]
        for n in self.numeric:
            try:
                value = float(f[n])
            except (KeyError, TypeError, ValueError):
                value = math.nan
            if not value > 0:
                raise ValueError(f"predict needs a positive {n} (the model was fitted on it). Fix: --at {n}=NUMBER")
            x.append(math.log(value))
        for c, levels in self.levels.items():
            if str(f.get(c)) not in levels:
                said = f"{c}={f[c]} was not in the run" if c in f else f"the model needs {c}"
                raise ValueError(f"{said} (it has {', '.join(levels)}). Fix: --at {c}={levels[0]} (or another of them)")
            x += [1.0 if str(f[c]) == lv else 0.0 for lv in levels[1:]]
        return x

    def predict(self, f: dict) -> float:
        return float(math.exp(np.dot(self._row(f), self.coef)))


def _design(obs: list[dict], numeric: list[str], levels: dict[str, list[str]]):
    m = Model("", numeric, levels, np.zeros(0), 0, None, 0)
    return np.array([m._row(o) for o in obs]), np.log([o["y"] for o in obs])


def fit(rows: list[dict], metric: str) -> Model:
    obs = observations(rows, metric)
    if len(obs) < 3:
        raise ValueError(f"{metric}: {len(obs)} measured points; a model needs at least 3")
    numeric = [n for n in NUMERIC if len({o.get(n) for o in obs}) > 1 and all(n in o for o in obs)]
    levels = _levels(obs)
    if not numeric and not levels:
        raise ValueError(f"{metric}: no factor varies in this run; sweep something first")
    X, y = _design(obs, numeric, levels)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float((resid ** 2).sum()) / ss_tot if ss_tot else 1.0
    errors = _leave_one_out(obs, X, y)
    sd = float(resid.std(ddof=min(len(resid) - 1, X.shape[1]))) if len(resid) > 1 else 0.0
    return Model(metric, numeric, levels, coef, r2, float(np.mean(errors)) if errors else None, sd)


def _levels(obs: list[dict]) -> dict[str, list[str]]:
    """The categorical factors that vary, each with its levels; one of two that split the
    observations alike is left out (physical rows are backend "host": aliased)."""
    levels: dict[str, list[str]] = {}
    seen = set()
    for c in CATEGORICAL:
        if not all(c in o for o in obs) or len({str(o[c]) for o in obs}) < 2:
            continue
        grouping = frozenset(frozenset(i for i, o in enumerate(obs) if str(o[c]) == v) for v in {str(o[c]) for o in obs})
        if grouping not in seen:
            seen.add(grouping)
            levels[c] = sorted({str(o[c]) for o in obs})
    return levels


def _leave_one_out(obs: list[dict], X, y) -> list[float]:
    """Each observation's relative error when the model is fitted without it (none when too few)."""
    if len(obs) <= X.shape[1] + 1:
        return []
    errors = []
    for i in range(len(obs)):
        keep = np.arange(len(obs)) != i
        c, *_ = np.linalg.lstsq(X[keep], y[keep], rcond=None)
        errors.append(abs(math.exp(X[i] @ c) / obs[i]["y"] - 1))
    return errors


def anomalies(model: Model, rows: list[dict], k: float = 3.0, floor: float = 0.25) -> list[tuple[dict, float]]:
    """Measured points whose value is far from the prediction: |log error| above k residual SDs
    and above `floor` (so a near-perfect fit does not flag noise)."""
    out = []
    for o in observations(rows, model.metric):
        pred = model.predict(o)
        err = math.log(o["y"] / pred)
        if abs(err) > max(k * model.resid_sd, math.log(1 + floor)):
            out.append((o, pred))
    return out
