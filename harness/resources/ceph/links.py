"""Around a point: the byte counters of the cluster's node links, sampled in a thread, and each
link's use over fio's measured window. Where the links are (veths here, or the hosts' own
interfaces) is the caller's: it gives one reader of {"rx_bytes", "tx_bytes"} per node."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

from harness.resources.ceph.plan import counters_at, link_utilisation

NETWORK_BOUND = 0.9   # a link above this share of its capacity during a point: the network was the bottleneck
MIN_WINDOW_S = 0.5    # a measured window shorter than this falls back to the whole call

Reader = Callable[[], dict[str, int] | None]   # None (or an error): not read this time, the next reading counts


@contextlib.contextmanager
def observed(readers: dict[int, Reader], capacity_mbit: dict[int, int], every_s: float) -> Iterator:
    """Yields the function the pipeline calls with fio's measured window (this machine's clock, or
    None): each node link's use over that window (over the whole call without one), and whether any
    link of a known capacity (a cap, or an interface's speed; 0 = unknown) ran above NETWORK_BOUND
    of it (network-bound). `link_mbit` is the slowest known capacity, 0 when none is known."""
    series: dict[int, list] = {k: [] for k in readers}
    stop = threading.Event()

    def sample() -> None:
        for k, read in readers.items():
            asked = time.time()
            try:
                counters = read()
            except Exception:  # noqa: BLE001 - a reading that failed is missed; the point's own result stands
                counters = None
            if counters is not None:   # read between the call and its answer (an ssh round trip): its middle
                series[k].append(((asked + time.time()) / 2, counters))

    def keep_sampling() -> None:
        while not stop.wait(every_s):
            sample()
    sample()
    sampler = threading.Thread(target=keep_sampling, name="link-counters", daemon=True)
    sampler.start()

    def use(window: tuple[float, float] | None) -> dict:
        read = {k: s for k, s in series.items() if len(s) >= 2}
        if not read:   # no link read twice: no figure, rather than a made-up one
            return {"link_window": "no readings", "network_bound": False}
        first = max(s[0][0] for s in read.values())
        last = min(s[-1][0] for s in read.values())
        t0, t1 = (max(window[0], first), min(window[1], last)) if window else (first, last)
        over = "fio's measured window" if window else "the whole call"
        if t1 - t0 < MIN_WINDOW_S:
            t0, t1, over = first, last, "the whole call"
        uses = {k: link_utilisation(counters_at(s, t0), counters_at(s, t1), t1 - t0, capacity_mbit.get(k, 0))
                for k, s in read.items()}
        observed = {f"link_n{k}_{d}_mbit_s": u[f"{d}_mbit_s"] for k, u in uses.items() for d in ("rx", "tx")}
        peak = max((u["utilisation"] for u in uses.values() if u["utilisation"] is not None), default=None)
        known = [capacity_mbit[k] for k in read if capacity_mbit.get(k)]
        return {**observed, "link_mbit": min(known, default=0), "link_peak_utilisation": peak,
                "link_window_s": round(t1 - t0, 2), "link_window": over,
                "network_bound": peak is not None and peak > NETWORK_BOUND}
    try:
        yield use
    finally:
        stop.set()
        sampler.join()
        sample()
