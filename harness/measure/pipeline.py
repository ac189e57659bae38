"""The one measurement pipeline. An experiment declares its points (where each runs, what it runs,
what it is compared with); the pipeline measures them and keeps everything:

- repeats run in rounds over all the points of a block, in a seeded shuffled order (recorded),
  never the same point twice in a row, so slow drift falls on both sides of every comparison;
- before each point: every fleet VM that takes no part in it is suspended, and the host is given
  a bounded wait to settle (CPU quiet, dirty pages written back);
- over each point: the host's CPU busy/steal and the CPU time of the participating QEMUs, storage
  daemons, libvirtd and the harness itself;
- each output's raw text is stored, parsed by its workload, and turned into samples that carry the
  standard metadata (added here and only here) and the conditions; a failure is a failed sample;
- a guest whose agent stops answering is looked at (domain state, console tail) and restarted
  before the next point;
- afterwards: VE/PE ratios against each point's declared baseline.

This follows PerfKit Benchmarker's Run-returns-Samples model with one metadata provider.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import random
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Protocol

import libvirt

from harness import backends
from harness.analysis import overlap
from harness.analysis.stats import difference, enough, summarize
from harness.common import bounded, cancel
from harness.common.console import step, warn
from harness.common.exits import StepFailed
from harness.config.core import RepeatConfig, SettleConfig
from harness.fleet import guest_consoles
from harness.hosts import page_cache
from harness.libvirt import pausing
from harness.libvirt.agent import AgentError, GuestAgent, in_parallel, restart
from harness.libvirt.libvirt_conn import connect
from harness.measure import conditions, hoststat
from harness.results.metrics import Direction, direction
from harness.results.outputs import Output
from harness.results.samples import Sample

PHYSICAL, VIRTUAL = "physical", "virtual"
# (label, command-line text) of the processes whose CPU time every point records, beside its QEMUs
# Storage daemons that poll a core by design: the settle wait does not count their CPU as other work
POLLING_DAEMONS = [(p.label, p.pattern) for p in backends.host_processes() if p.polls]
PROCESS_PATTERNS = [*((p.label, p.pattern) for p in backends.host_processes()), ("libvirtd", "libvirtd")]
CPU_LABELS = ["qemu", *dict.fromkeys(label for label, _ in PROCESS_PATTERNS)]   # every sample has a figure for each


LONG_POINT_S = 60   # a point running longer says so (a heartbeat): shorter ones have their own line
WATCH_S = 10   # how often the fleet's storage is asked for faults while a point runs (a `ceph health` each)


class StorageFault(StepFailed):
    """The storage under the fleet's disks cannot complete I/O (its own words)."""


class Parsed(Protocol):
    version: str

    def metrics(self) -> dict[str, tuple[float, str]]: ...


def as_run(r: Parsed) -> dict:
    """What the tool says it ran with, where a result tells (fio's engine): it overrides the job's
    fields in the sample metadata, which say what was asked."""
    return r.as_run() if hasattr(r, "as_run") else {}


def detail(r: Parsed, metric: str) -> dict:
    """What a sample of the metric keeps beside its value, where the result has more (fio's whole
    latency distribution beside a percentile)."""
    return r.detail(metric) if hasattr(r, "detail") else {}


@dataclass(frozen=True)
class Site:
    """One host a point may involve, and its libvirtd: a fleet that spans hosts has several."""
    host: Any
    uri: str


@dataclass(frozen=True)
class Point:
    id: str                                  # unique in the run; names the raw folder
    env: str                                 # physical | virtual
    backend: str                             # "host" when physical
    vms: tuple[str, ...]                     # the guests it runs in; every other fleet VM is suspended
    run: Callable[[], list[Output]]          # runs the workload once
    parse: Callable[[str], Parsed]           # the workload's own parser
    headline: str                            # the metric repeats, ratios, the noisy flag and reports look at
    meta: dict = field(default_factory=dict)  # the experiment's own fields (group, label, job)
    aggregate: Callable[[list[Any]], dict] | None = None   # metrics over the outputs (scope aggregate): name ->
                                                            # (value, unit[, what its sample keeps beside it])
    baseline: str | None = None              # id of the physical point a VE/PE ratio is taken against
    raw_suffix: str = ".json"
    on_failure: Callable[[Exception], list[Output]] | None = None   # raw files to keep from a failure
    # read around the run (a cluster's link counters); what it yields is called with the tools' measured
    # window on this machine's clock (or None), and the dict it returns joins the metadata
    observe: Callable[[], ContextManager[Callable[[tuple[float, float] | None], dict]]] | None = None

    @property
    def better(self) -> Direction:
        """The headline's direction, as harness/results/metrics.py declares it."""
        if (d := direction(self.headline)) is None:
            raise ValueError(f"point {self.id}: headline {self.headline!r} has no declared direction. "
                             "Fix: declare it in harness/results/metrics.py")
        return d


@dataclass
class _Executed:
    """One run of a point, as _recorded takes it."""
    outputs: list[Output]
    run_s: float
    settled: list                 # each site's settle result
    before: list[dict]            # each site's snapshot as the point started
    after: list[dict]             # and as it ended
    paused: list                  # each site's suspended guests
    restarted: str                # guests restarted before the point, and why
    own_cpu_s: float              # the harness's own CPU over the point
    observed_over: Callable[[tuple[float, float] | None], dict]


def measured_window(parsed: list, outputs: list[Output]) -> tuple[float, float] | None:
    """From the first participant's start to the last one's end of their measured runs, on this
    machine's clock; None when a tool does not say when it ran."""
    windows = [(w[0] - out.clock_offset_s, w[1] - out.clock_offset_s)
               for r, out in zip(parsed, outputs) if (w := getattr(r, "window", None))]
    if not windows or len(windows) < len(parsed):
        return None
    return min(w[0] for w in windows), max(w[1] for w in windows)


def schedule(ids: list[str], rng: random.Random, last: str | None) -> list[str]:
    """One round: the ids shuffled, never starting with `last` (the previous round's final point)
    when there is a choice."""
    order = list(ids)
    rng.shuffle(order)
    if len(order) > 1 and order[0] == last:
        swap = rng.randrange(1, len(order))
        order[0], order[swap] = order[swap], order[0]
    return order


def block_rng(seed: int, ids: list[str]) -> random.Random:
    """A block's shuffling: from the run's seed and the block's point ids alone, so that a resumed
    run (whose done blocks are not measured again) draws every block's rounds as the first run did."""
    return random.Random(f"{seed}/{'|'.join(ids)}")


def new_seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


# what names a facet of a point (a job file's job and direction): harness/workloads/fio.py parse_jobs
FACET_KEYS = ("point_id", "point", "job", "direction", "ioengine", "group_id")
RUN_ONLY = frozenset({"run_id", "accel_reason", "vm_start"})   # what one run records that does not decide a result


class Pipeline:
    def __init__(self, *, store, repeat: RepeatConfig, settle: SettleConfig, seed: int, host, uri: str,
                 quiet_prefixes: tuple[str, ...], base_meta: dict, progress=None, sites: list[Site] | None = None):
        self.store = store
        self.repeat = repeat
        self.settle = settle
        self.seed = seed
        self.host = host
        self.uri = uri
        self.sites = sites or [Site(host, uri)]   # every host whose VMs and load a point involves
        self.quiet_prefixes = quiet_prefixes   # fleets whose idle VMs are suspended during a point
        self.base_meta = base_meta             # run id, experiment, environment: on every sample
        self.progress = progress
        self.rng = random.Random(seed)
        self.last: str | None = None
        self.started = time.monotonic()   # the time budget of added rounds counts from here
        self.budget_share = 1.0           # of the budget, what may be spent by the end of this block
        self.budget_ended = False
        self.failed: set[str] = set()
        self.conns: list[libvirt.virConnect] = []   # the block's connections, one a site, as reopened
        self.broken = ""          # why the block's fleet cannot be measured any more (a guest that cannot be restarted)
        self.guest_lost = False   # broken by a guest that could not be restarted: a new fleet may help
        self.rebuilt = False      # the block's fleet was built anew once already
        self.rebuild: Callable[[], dict] | None = None   # how the block's fleet is built anew
        self.block: list[Point] = []
        self.testbed_meta: dict = {}
        self.facet_meta: dict[str, dict] = {}   # <point id>#<facet> -> what names the facet (its point, job, direction)

    # --- one block of points, in rounds ---------------------------------------------------
    def measure(self, points: list[Point], testbed_meta: dict | None = None,
                rebuild: Callable[[], dict] | None = None) -> None:
        """Measures every point `count` times (more when adaptive), in shuffled rounds, then takes
        the VE/PE ratio of each point that declares a baseline among them. `rebuild` builds the
        block's fleet anew (returning its metadata): asked once, when a guest cannot be restarted."""
        if not points:
            return
        by_id = self._begin(points, testbed_meta, rebuild)
        rounds = self.repeat.max_count if self._adaptive() else self.repeat.count
        done = self.store.done()   # a resumed run's: kept, and not measured again
        if kept := sum((p.id, r) in done for p in points for r in range(rounds)):
            step(f"  {kept} point runs of this block were measured before: kept")
        try:
            self.conns = [connect(site.uri) for site in self.sites]
        except libvirt.libvirtError as e:
            self.broken = e.get_error_message()
            self._fail_rest(points)
            return
        try:
            self._resume_left_paused(self.conns)
            if self.broken:
                self._fail_rest(points)
                return
            for r in range(rounds):
                if not self._round(r, rounds, by_id, done):
                    break
        finally:   # the connections as they are now: a point may have reopened one
            self.keep_consoles()
            for conn in self.conns:
                with contextlib.suppress(libvirt.libvirtError):
                    conn.close()
        self._ratios(points)

    def _adaptive(self) -> bool:
        return self.repeat.adaptive or self.repeat.precision is not None

    def _begin(self, points: list[Point], testbed_meta: dict | None, rebuild: Callable[[], dict] | None) -> dict:
        """A block's state, fresh: its points by id, its fleet's metadata, its own shuffle, and a
        resumed run's facets known from their samples."""
        by_id = {p.id: p for p in points}
        if len(by_id) != len(points):
            raise ValueError("point ids must be unique")
        self.testbed_meta = testbed_meta or {}
        self.broken, self.guest_lost, self.rebuilt, self.budget_ended = "", False, False, False
        self.rebuild, self.block = rebuild, points
        self.rng, self.last = block_rng(self.seed, [p.id for p in points]), None
        for sample in self.store.samples:
            pid = str(sample.metadata.get("point_id", ""))
            if "#" in pid and pid not in self.facet_meta:
                self.facet_meta[pid] = {k: sample.metadata[k] for k in FACET_KEYS if k in sample.metadata}
        return by_id

    def _resume_left_paused(self, conns: list[libvirt.virConnect]) -> None:
        """Guests a killed run left suspended, resumed; one that does not resume (bounded) is
        restarted, else the block is broken."""
        for conn in conns:
            try:
                if left := pausing.resume_paused(conn, self.quiet_prefixes):
                    warn(f"resumed {', '.join(left)}, left suspended by a run that was killed")
            except libvirt.libvirtError as e:
                guest = getattr(e, "guest", "")
                if not guest or not self._recover(conns, (guest,), force=True)[1]:
                    self.broken = self.broken or e.get_error_message()

    def _budget_over(self) -> bool:
        """With a time budget: whether this block's share of it has ended (said once)."""
        s = self.repeat
        if self.budget_ended:
            return True
        if s.budget_s is None or time.monotonic() - self.started <= s.budget_s * self.budget_share:
            return False
        self.budget_ended = True
        warn(f"this block's share of the time budget ({s.budget_s * self.budget_share:g} of "
             f"{s.budget_s:g} s) ended: no more rounds are added")
        return True

    def _todo(self, r: int, by_id: dict[str, Point]) -> list[str]:
        """The points round r measures: every one not failed; past `count`, only those not yet
        precise enough."""
        added = self._adaptive() and r >= self.repeat.count
        return [p.id for p in self.block if p.id not in self.failed and not (added and self._converged(p, by_id))]

    def _round(self, r: int, rounds: int, by_id: dict[str, Point], done: set) -> bool:
        """Round r: the points still to measure (a round past `count` only those not yet precise
        enough), shuffled; those a resumed run measured are skipped. An added round stops where the
        time budget ends. Whether to go on."""
        s = self.repeat
        if r >= s.count and self._budget_over():
            return False
        todo = self._todo(r, by_id)
        if not todo:
            return False
        if r >= s.count and self.progress:
            self.progress.add(len(todo))
        order = schedule(todo, self.rng, self.last)
        for i, pid in enumerate(order):
            if self.broken and not self._rebuilt():
                break
            if r >= s.count and self._budget_over():
                if self.progress:   # the round's rest is not measured
                    self.progress.add(-(len(order) - i))
                return False
            if (pid, r) in done:
                self.last = pid
                if self.progress:
                    self.progress.add(-1)
                continue
            self.conns = self._reconnected(self.conns)
            self._one(self.conns, by_id[pid], r, i)
            self.last = pid
        if self.broken and not (r + 1 < rounds and self._rebuilt()):
            self._fail_rest(self.block)
            return False
        return True

    def _rebuilt(self) -> bool:
        """After a guest that could not be restarted: the block's fleet built anew, once a block,
        so that the point that lost it is measured again at once and the rest of the block on the
        new fleet; said, and on every later sample."""
        if self.rebuild is None or not self.guest_lost or self.rebuilt:
            return False
        why, self.rebuilt = self.broken, True
        warn(f"rebuilding the block's fleet: {why}")
        try:
            meta = self.rebuild()
        except Exception as e:   # recorded on the rest of the block, which then fails with it
            self.broken = f"{why}; building the fleet anew failed too ({e})"
            return False
        self.testbed_meta = {**meta, "fleet_rebuilt_after": why}
        self.broken, self.guest_lost = "", False
        self.failed -= {p.id for p in self.block}
        step("  the block's fleet was built anew; measuring the point again and the rest of the block")
        return True

    def _fail_rest(self, points: list[Point]) -> None:
        """Every point of the block not yet failed is recorded failed with the reason the block's
        fleet cannot be measured; the run goes on with the next block."""
        rest = [p for p in points if p.id not in self.failed]
        warn(f"the rest of this block ({len(rest)} points) is not measured: {self.broken}")
        for p in rest:
            self.store.add([Sample(p.headline, None, "", {**self._meta(p, 0, -1), "scope": "aggregate", "vm": ""},
                                   status="failed", error=f"not measured: {self.broken}")])
            self.failed.add(p.id)
            if self.progress:
                self.progress.done()

    def _reconnected(self, conns: list[libvirt.virConnect]) -> list[libvirt.virConnect]:
        """The connections, each reopened when its host's libvirtd dropped it; one that cannot be
        reopened makes the points that need it fail (recorded), and the next point tries again."""
        fresh = []
        for conn, site in zip(conns, self.sites):
            try:
                new = _fresh(conn, site.uri)
            except libvirt.libvirtError as e:
                warn(f"libvirtd at {site.uri} is not answering ({e.get_error_message()}); the next point may fail")
                new = conn
            if new is not conn:
                warn(f"the connection to libvirtd at {site.uri} was lost; reconnected")
            fresh.append(new)
        return fresh

    def keep_consoles(self) -> None:
        """The fleet guests' consoles, and a nested or remote host's own logs, kept in the run's consoles/ folder."""
        for site in self.sites:
            guest_consoles.keep(site.host, site.uri, self.quiet_prefixes, self.store.dir / "consoles")

    def _converged(self, p: Point, block: dict[str, Point]) -> bool:
        """Whether a point needs no more rounds: adaptive, its own CI within target; with a
        precision, the ratio interval of every VE/PE pair it takes part in within it."""
        s = self.repeat
        if s.precision is None:
            return all(enough(self.values(pid, p.headline), s.target_rel_ci, minimum=s.count)
                       for pid in self.point_ids(p.id))
        partners = [p] if p.baseline in block else [q for q in block.values() if q.baseline == p.id]
        if not partners:
            return all(enough(self.values(pid, p.headline), s.precision, minimum=s.count) for pid in self.point_ids(p.id))
        # a pair whose other side failed gains nothing from more rounds
        pairs = [q for q in partners if q.id not in self.failed and q.baseline not in self.failed]
        return all(width is not None and width <= s.precision for q in pairs for width in self.ratio_widths(q).values())

    def ratio_widths(self, p: Point) -> dict[str, float | None]:
        """The relative half-width of each VE/PE ratio's 95% CI the point (or each of its facets)
        has against its baseline so far; None where no interval can be taken yet."""
        out: dict[str, float | None] = {}
        for pid in self.point_ids(p.id):
            virt, phys = self.values(pid, p.headline), self.values(p.baseline + pid[len(p.id):], p.headline)
            d = difference(phys, virt) if len(virt) >= 2 and len(phys) >= 2 else None
            if d is None:   # too few repeats, or none with spread (then it is exact)
                out[pid] = 0.0 if len(virt) >= 2 and len(phys) >= 2 else None
            else:
                out[pid] = (d.high - d.low) / 2 / d.ratio if 0 < d.ratio < float("inf") else None
        return out

    def values(self, point_id: str, metric: str) -> list[float]:
        """The point's values of a metric over its repeats (aggregate scope where it has one)."""
        rows = [x for x in self.store.samples if x.metadata.get("point_id") == point_id and x.metric == metric
                and x.status == "ok" and x.metadata.get("repeat") != "all"]
        agg = [x.value for x in rows if x.metadata.get("scope") == "aggregate"]
        return agg or [x.value for x in rows]

    # --- one repeat of one point ----------------------------------------------------------
    def _meta(self, p: Point, rep: int | str, order: int) -> dict:
        """The standard metadata of every sample: one place."""
        return {**self.base_meta, **self.testbed_meta, "point_id": p.id, "point_key": self.point_key(p),
                "env": p.env, "backend": p.backend,
                "vm_count": len(p.vms) if p.env == VIRTUAL else p.meta.get("vm_count", 0), **p.meta,
                "headline": p.headline, "better": p.better.value,
                "repeat": rep, "round_order": order, "seed": self.seed,
                "drop_caches": self.repeat.drop_caches, "noisy_cv_threshold": self.repeat.noisy_cv}

    def point_key(self, p: Point) -> str:
        """A point's identity across runs: a hash of everything that decides its result (the point
        and its workload's settings, the block's setup: fleet, disk, backend, device, image; the
        host, its accelerator, the tools' and the harness's versions), not of what one run adds."""
        decided = {"point": p.id, "env": p.env, "backend": p.backend, "vms": len(p.vms), "headline": p.headline,
                   "meta": p.meta, "setup": {k: v for k, v in self.testbed_meta.items() if k not in RUN_ONLY},
                   "environment": {k: v for k, v in self.base_meta.items() if k not in RUN_ONLY}}
        return hashlib.sha256(json.dumps(decided, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def _one(self, conns: list[libvirt.virConnect], p: Point, rep: int, order: int, retried_after: str = "") -> None:
        """One repeat of one point: its execution (_executed), the sample it writes (_recorded), and
        its failure policy (_failed). When its guest stops answering mid-point and a restart brings
        it back, or else the block's fleet is built anew, the point is measured once more at once
        (its samples say why in `retried_after`); a second loss is recorded as the point's failure."""
        meta = {**self._meta(p, rep, order), **({"retried_after": retried_after} if retried_after else {})}
        what = f"{p.id} (repeat {rep + 1}{', again' if retried_after else ''})"
        if self.progress and not retried_after:
            self.progress.start(what)
        step(f"  {what}")
        t0 = time.monotonic()
        retry = interrupted = False
        error = ""
        try:
            self._recorded(p, rep, meta, t0, self._executed(conns, p))
        except (KeyboardInterrupt, SystemExit):
            interrupted = True   # the run's stop stays signalled (cancel.CANCEL)
            raise
        except Exception as e:  # recorded as failed, never as a number
            if (stop := cancel.interrupt_in(e)) is not None:   # a Ctrl-C a cleanup's error hid: the run stops
                interrupted = True
                raise stop from e
            retry, error = self._failed(conns, p, rep, e, meta, t0, retried_after)
        finally:
            if not interrupted:
                cancel.point_done()
            if self.progress and not retry:
                self.progress.done()
        if retry:
            self.conns = self._reconnected(conns)
            self._one(self.conns, p, rep, order, retried_after=error)

    def _executed(self, conns: list[libvirt.virConnect], p: Point) -> "_Executed":
        """The point run once: the idle guests suspended, its own checked, the host settled, the tool
        run under the storage watch, and the host's load snapshotted before and after."""
        if why := self._fault():   # before the fleet is touched: a guest with I/O stuck on it would not pause
            raise StorageFault(why)
        with contextlib.ExitStack() as stack:
            paused = [stack.enter_context(pausing.suspended(conn, self.quiet_prefixes, keep=set(p.vms)))
                      for conn in conns]
            restarted, _ = self._check_guests(conns, p.vms)
            if self.repeat.drop_caches:
                self._drop_caches(conns, p.vms)
            patterns = [*(("qemu", conditions.qemu_pattern(vm)) for vm in p.vms), *PROCESS_PATTERNS]
            # the settle wait ends with the point's starting snapshot (one call on a remote host)
            with bounded.heartbeat("the host to settle", self.settle.max_wait_s):
                settled = self._on_sites(lambda site: conditions.settle(site.host, self.settle, POLLING_DAEMONS,
                                                                        then=patterns))
            self_before = _own_cpu_s()
            t_run = time.monotonic()
            with (p.observe() if p.observe else contextlib.nullcontext(lambda window: {}) as observed_over,
                  self._watched(), bounded.heartbeat(f"{p.id} to finish", after_s=LONG_POINT_S)):
                outputs = p.run()
            run_s = time.monotonic() - t_run
            after = self._on_sites(lambda site: hoststat.snapshot_on(site.host, patterns))
            return _Executed(outputs, run_s, settled, [s.snapshot for s in settled], after, paused, restarted,
                             _own_cpu_s() - self_before, observed_over)

    def _recorded(self, p: Point, rep: int, meta: dict, t0: float, ran: "_Executed") -> None:
        """The point's raw outputs kept, parsed by its workload, with the conditions it ran under,
        as samples in the store; its headline said."""
        kept = [self._keep(p, rep, out) for out in ran.outputs]   # before parsing: a bad output is kept too
        meta.update(kept[0] if kept else {})   # in place: a failure to parse it names the file kept
        parsed = [p.parse(out.raw) for out in ran.outputs]
        observed = ran.observed_over(measured_window(parsed, ran.outputs))
        per_site = []
        for i, site in enumerate(self.sites):
            usage = conditions.usage_between(ran.before[i], ran.after[i], CPU_LABELS)
            # ours: the harness (counted once), and on a host other than this machine the host-side
            # tools' own (a guest's tool is in its QEMU's CPU time already)
            ours = (ran.own_cpu_s if i == 0 else 0.0) + sum(
                getattr(r, "cpu_s", 0.0) for r, out in zip(parsed, ran.outputs)
                if p.env == PHYSICAL and not site.host.is_this_machine and out.host in ("", site.host.name))
            per_site.append(self._conditions(usage, ours, ran.settled[i], ran.paused[i], ran.after[i]["ncpu"]))
        cond = per_site[0] if len(per_site) == 1 else combine_conditions(
            {site.host.name: c for site, c in zip(self.sites, per_site)})
        meta = {**meta, **cond, **observed, "point_wall_s": round(time.monotonic() - t0, 3),
                "run_wall_s": round(ran.run_s, 3), "guests_restarted": ran.restarted}
        samples = self._samples(p, ran.outputs, kept, parsed, meta)
        self.store.add(samples)
        head = next((x for x in samples if x.metric == p.headline and x.metadata.get("scope") == "aggregate"),
                    next(x for x in samples if x.metric == p.headline))
        step(f"      {p.headline} {head.value:,.1f} {head.unit}; host busy {cond['host_busy_pct']:.0f}%, "
             f"settled in {cond['settle_wait_s']:.1f}s"
             f"{'' if cond['host_quiet'] else ' [not quiet: ' + cond['quiet_reason'] + ']'}")

    def _diagnosed(self, conns: list[libvirt.virConnect], p: Point, e: Exception, aborted: str | None
                   ) -> tuple[str, bool, bool]:
        """What a point's error says of the fleet, acted on: a storage fault or a dead libvirtd breaks
        the block; a guest that stopped answering is restarted. (notes for the error, whether a guest
        came back, whether that guest was another point's)."""
        if isinstance(e, StorageFault) or aborted:   # no restart helps a guest whose storage cannot complete I/O
            self.broken = f"the storage under the fleet says {aborted or e}"
        elif isinstance(e, bounded.Unanswered) and e.guest:   # a guest that did not pause (or resume) in time
            notes, recovered = self._recover(conns, (e.guest,), force=True)
            return notes, recovered, e.guest not in p.vms
        elif isinstance(e, bounded.Unanswered):   # libvirtd itself: every further call would wait too
            self.broken = str(e)
        elif isinstance(e, TimeoutError) and p.vms:  # its agent may answer while a disk queue is stuck
            notes, recovered = self._check_guests(conns, p.vms)
            return ("\n" + notes if notes else ""), recovered, False
        elif isinstance(e, AgentError):
            notes, recovered = self._recover(conns, p.vms)
            return notes, recovered, False
        return "", False, False

    def _failed(self, conns: list[libvirt.virConnect], p: Point, rep: int, e: Exception, meta: dict, t0: float,
                retried_after: str) -> tuple[bool, str]:
        """The failure policy: what the error says of the fleet (a storage fault or a dead libvirtd
        breaks the block; a guest that stopped answering is restarted, or the fleet built anew), and
        whether the point is measured again at once; otherwise it is recorded failed, with the files
        its workload keeps. (retry, the error)."""
        error = str(e)
        if why := cancel.point_aborted():
            error = f"{why} (the point was stopped: {error})"
            cancel.point_done()   # what follows (keeping a failed point's files) runs commands again
        notes, recovered, elsewhere = self._diagnosed(conns, p, e, why)
        error += notes
        files = {}
        for out in p.on_failure(e) if p.on_failure else []:
            files.update(self._keep(p, rep, out))
        if recovered and p.vms and not retried_after and not elsewhere:
            warn(f"{p.id}: its guest stopped answering and was restarted; measuring the point again")
            return True, error
        if self.guest_lost and not retried_after and self._rebuilt():
            return True, error   # on the new fleet, at once: a run of one repeat keeps the point
        self.store.add([Sample(p.headline, None, "", {**meta, "scope": "aggregate", "vm": "", **files,
                                                      "point_wall_s": round(time.monotonic() - t0, 3)},
                               status="failed", error=error)])
        self.failed.add(p.id)
        warn(f"{p.id} failed: {error} (not repeated)")
        return False, error

    def _fault(self) -> str | None:
        """What the fleet's storage says stops its I/O now (its backend's own check), or None."""
        meta = self.testbed_meta
        try:
            return backends.get(meta["backend"]).fault(self.host, meta["device"]) if meta.get("device") else None
        except Exception:   # a probe that cannot run says nothing; the point's own bounds still hold
            return None

    @contextlib.contextmanager
    def _watched(self):
        """The fleet's storage is asked for faults every WATCH_S while the point runs: a fault stops
        the point's commands (they raise, and the point's error names the fault)."""
        done, lock = threading.Event(), threading.Lock()

        def watch() -> None:
            while not done.wait(WATCH_S):
                why = self._fault()
                with lock:   # an answer that comes after the point ended must not stop the next one
                    if done.is_set():
                        return
                    if why:
                        warn(f"stopping the point: {why}")
                        cancel.abort_point(why)
                        return
        threading.Thread(target=watch, name="storage watch", daemon=True).start()
        try:
            yield
        finally:
            with lock:
                done.set()

    def _on_sites(self, fn: Callable[[Site], Any]) -> list:
        """fn on every site at once (a settle wait or a snapshot on each host), in site order."""
        if len(self.sites) == 1:
            return [fn(self.sites[0])]
        with ThreadPoolExecutor(len(self.sites)) as pool:
            return list(pool.map(fn, self.sites))

    def _conditions(self, usage: conditions.Usage, harness_cpu_s: float, settled, paused, ncpu: int) -> dict:
        """The point's conditions, and whether the host was quiet: it settled, and work other than
        the point's own (QEMU, daemons, libvirtd, the harness and its tools) stayed under the bound."""
        load = usage.load
        ours = sum(usage.cpu_s.values()) + harness_cpu_s
        other = max(0.0, load.busy_pct - 100 * ours / (max(load.seconds, 1e-9) * ncpu))
        reasons = []
        if settled.timed_out:
            reasons.append(f"the host did not settle within {self.settle.max_wait_s:g} s "
                           f"(busy {settled.last.busy_pct + settled.last.iowait_pct:.0f}%, "
                           f"dirty {settled.last.dirty_mib:.0f} MiB)")
        if other > self.repeat.noisy_busy_pct:
            reasons.append(f"other work used {other:.0f}% of the host's CPU during the point")
        if load.steal_pct > 5:
            reasons.append(f"{load.steal_pct:.0f}% CPU steal")
        return {**usage.metadata(),
                "harness_cpu_s": round(harness_cpu_s, 3), "host_other_busy_pct": round(other, 1),
                "settle_wait_s": settled.wait_s, "settle_timed_out": settled.timed_out,
                "settle_exempt_busy_pct": settled.exempt_busy_pct, "suspended_vms": len(paused),
                "host_quiet": not reasons, "quiet_reason": "; ".join(reasons)}

    def _keep(self, p: Point, rep: int, out: Output) -> dict:
        """Stores an output's raw text and its extra files; returns the raw path for the metadata."""
        stem = f"{p.id}/{out.who}{'' if rep == 0 else f'.r{rep}'}"
        paths = {}
        if out.raw:
            paths["raw"] = self.store.save_raw(stem + p.raw_suffix, out.raw)
        for suffix, text in out.extra.items():
            kept = self.store.save_raw(f"{stem}.{suffix}", text)
            paths.setdefault("raw", kept)
        return paths

    def _samples(self, p: Point, outputs: list[Output], kept: list[dict], parsed: list, meta: dict) -> list[Sample]:
        if hasattr(parsed[0], "facets"):
            return self._faceted(p, outputs, kept, parsed, meta)
        samples = []
        scope = "vm" if p.env == VIRTUAL else "slot"
        for out, paths, r in zip(outputs, kept, parsed):
            where = {"host": out.host} if out.host else {}
            samples += [Sample(m, v, u, {**meta, **as_run(r), "scope": scope, "vm": out.who, **where, **paths,
                                         "tool_version": r.version, **detail(r, m)})
                        for m, (v, u) in r.metrics().items()]
        if p.aggregate is not None:
            agg_meta = {**meta, **as_run(parsed[0]), "scope": "aggregate", "vm": "", "tool_version": parsed[0].version}
            windows = [getattr(r, "window", None) for r in parsed]
            if len(windows) > 1 and all(windows):  # the tool says when each participant ran
                agg_meta.update(overlap.metadata(windows, [out.clock_offset_s for out in outputs]))
            # (value, unit), or (value, unit, what the sample keeps beside it)
            samples += [Sample(m, v, u, {**agg_meta, **(more[0] if more else {})})
                        for m, (v, u, *more) in p.aggregate(parsed).items()]
        samples += self._efficiency(p, samples, meta)
        return samples

    def _faceted(self, p: Point, outputs: list[Output], kept: list[dict], parsed: list, meta: dict) -> list[Sample]:
        """A run that reports several figures apart (a job file's jobs and directions): each facet
        its own point (`<point id>#<facet>`), measured in the same run, never summed with the others."""
        by_output = [{key: (facet_meta, r) for key, facet_meta, r in x.facets()} for x in parsed]
        samples = []
        for key in by_output[0]:
            if missing := [out.who for out, facets in zip(outputs, by_output) if key not in facets]:
                raise ValueError(f"{key} is missing from the report of {', '.join(missing)}: the participants ran "
                                 "different jobs")
            facet_meta = {**by_output[0][key][0], "point_id": f"{p.id}#{key}"}
            self.facet_meta[facet_meta["point_id"]] = facet_meta
            samples += self._samples(p, outputs, kept, [f[key][1] for f in by_output], {**meta, **facet_meta})
        return samples

    def point_ids(self, point_id: str) -> list[str]:
        """The ids a point's samples carry: its own, or its facets' (`<id>#<facet>`)."""
        facets = [k for k in self.facet_meta if k.startswith(point_id + "#")]
        return facets or [point_id]

    @staticmethod
    def _efficiency(p: Point, samples: list[Sample], meta: dict) -> list[Sample]:
        """I/Os per CPU-second spent by QEMU and the point's backend's own daemons (virtual points):
        another backend's daemons still running (a Ceph cluster of another fleet) are not its cost."""
        if p.env != VIRTUAL or "#" in meta.get("point_id", ""):   # a facet: the run's CPU is every facet's
            return []
        metric = "aggregate_iops" if p.aggregate else "iops"  # the point's total IOPS
        iops = [x for x in samples if x.metric == metric]
        backend = backends.all_backends().get(p.backend)
        data_path = ["qemu", *dict.fromkeys(x.label for x in (backend.processes if backend else ()))]
        cpu = sum(meta.get(f"{label}_cpu_s", 0.0) for label in data_path)
        seconds = meta.get("run_wall_s") or 0
        if not iops or cpu <= 0 or not seconds:
            return []
        return [Sample("ios_per_cpu_s", iops[0].value / (cpu / seconds), "IO/CPU-s",
                       {**iops[0].metadata})]

    # --- around a point -------------------------------------------------------------------
    def _drop_caches(self, conns: list[libvirt.virConnect], vms: tuple[str, ...]) -> None:
        """On every site and in every guest of the point, at once (a command costs a second or more
        on a nested host)."""
        self._on_sites(lambda site: site.host.run(["sh", "-c", DROP_CACHES], timeout=page_cache.FLUSH_S))
        agents = [GuestAgent(self._domain(conns, name)[1]) for name in vms]
        for name, res in zip(vms, in_parallel(lambda agent: agent.exec("/bin/sh", ["-c", DROP_CACHES], timeout=30), agents)):
            if res.exitcode != 0:
                raise AgentError(f"{name}: dropping the page cache failed")

    def _domain(self, conns: list[libvirt.virConnect], name: str) -> tuple[int, libvirt.virDomain]:
        """The guest's site (its index) and domain: names are unique across the hosts of a fleet."""
        for i, conn in enumerate(conns):
            try:
                return i, conn.lookupByName(name)
            except libvirt.libvirtError:
                continue
        raise AgentError(f"{name}: no such guest on {', '.join(s.uri for s in self.sites)}")

    def _check_guests(self, conns: list[libvirt.virConnect], vms: tuple[str, ...]) -> tuple[str, bool]:
        """Before a point, and after one that timed out: each guest answers and every disk it has
        completes one direct read. A guest that does not (its agent gone, or a disk queue stuck)
        is restarted. Returns the reasons (recorded in the point's samples), and whether a guest
        was restarted and every one answers again."""
        def probe(name: str) -> str | None:
            try:
                res = GuestAgent(self._domain(conns, name)[1]).exec("/bin/sh", ["-c", DISK_PROBE], timeout=GUEST_PROBE_S)
            except AgentError as e:
                return str(e)
            return None if res.exitcode == 0 else \
                f"a disk did not complete a read ({res.stderr.decode(errors='replace').strip()[-200:]})"
        notes, recovered = [], True
        for name, why in zip(vms, in_parallel(probe, vms)):   # every guest at once; restarts one by one
            if why is None:
                continue
            warn(f"{name}: {why}; restarting it")
            restart_notes, restarted = self._recover(conns, (name,), force=True)
            notes.append(f"{name}: {why}{restart_notes}")
            recovered = recovered and restarted
        return "\n".join(notes), bool(notes) and recovered

    def _recover(self, conns: list[libvirt.virConnect], vms: tuple[str, ...], force: bool = False) -> tuple[str, bool]:
        """After an agent error: what state each guest is in, the tail of its console, and a
        restart of any guest that no longer answers, so the next point finds it working. Returns
        those notes, and whether a guest was restarted and every one answers again."""
        notes, restarted, lost = [], False, False
        for name in vms:
            try:
                conns = [_fresh(conn, site.uri) for conn, site in zip(conns, self.sites)]
                i, dom = self._domain(conns, name)
                state = _STATES.get(dom.state()[0], "unknown")
                agent = GuestAgent(dom)
                if not force and state == "running" and agent.ping(timeout=5):
                    continue
                tail = guest_consoles.tail(self.sites[i].host, dom)
                notes.append(f"{name} was {state} and its agent did not answer; console tail:\n{tail}")
                warn(f"{name}: not answering ({state}); restarting the guest")
                restart(dom)
                with bounded.heartbeat(f"{name} to boot again", RESTART_READY_S):
                    agent.wait_ready(RESTART_READY_S)
                notes.append(f"{name} restarted")
                restarted = True
            except (libvirt.libvirtError, AgentError) as e:
                notes.append(f"{name}: could not be restarted ({e})")
                self.broken = f"{name} stopped answering and could not be restarted ({e})"
                self.guest_lost = True
                lost = True
        return ("\n" + "\n".join(notes)) if notes else "", restarted and not lost

    # --- after a block ---------------------------------------------------------------------
    def derived_meta(self, p: Point) -> dict:
        """Metadata of a value derived over a point's repeats (a ratio, a model's expectation)."""
        return {**self._meta(p, "all", -1), "scope": "aggregate", "vm": ""}

    def _precision_meta(self, p: Point, pid: str) -> dict:
        """With a precision: the ratio interval's width, whether it met the target, and whether the
        time budget ended first (said once per such ratio)."""
        target = self.repeat.precision
        if target is None:
            return {}
        width = self.ratio_widths(p).get(pid)
        met = width is not None and width <= target
        if not met:
            now = f"its VE/PE ratio is within ±{width:.0%}" if width is not None else "its VE/PE ratio has no interval yet"
            ended = "the time budget ended" if self.budget_ended else "repeat.max_count was reached"
            warn(f"{pid}: {now}, not ±{target:.0%}: {ended} first")
        return {"precision_target": target, "ratio_ci_rel": None if width is None else round(width, 4),
                "precision_met": met, "budget_ended_first": bool(not met and self.budget_ended)}

    def _ratios(self, points: list[Point]) -> None:
        """VE/PE of each virtual point's headline against its baseline's, as means over repeats."""
        by_id = {p.id: p for p in points}
        derived = []
        for p in points:
            if not p.baseline or p.baseline not in by_id:
                continue
            for pid in self.point_ids(p.id):   # a faceted point: each facet against the baseline's same facet
                facet = pid[len(p.id):]
                virt, phys = self.values(pid, p.headline), self.values(p.baseline + facet, p.headline)
                if not virt or not phys or summarize(phys).mean == 0:
                    continue
                meta = {**self.derived_meta(p), **self.facet_meta.get(pid, {}), "ratio_of": p.headline,
                        "baseline_point": p.baseline + facet, "n_virtual": len(virt), "n_physical": len(phys),
                        **self._precision_meta(p, pid)}
                derived.append(Sample("ve_pe_ratio", summarize(virt).mean / summarize(phys).mean, "ratio", meta))
        if derived:
            self.store.add(derived)


GUEST_PROBE_S = 20
RESTART_READY_S = 180     # a restarted guest's agent answers within this (a TCG boot takes about a minute)
DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches"
# One 4 KiB direct read from every disk of a guest: a virtqueue that lost a notification hangs here.
DISK_PROBE = ('for d in /sys/block/*; do n=${d##*/}; case $n in loop*|ram*|sr*) continue;; esac; '
              'dd if=/dev/$n of=/dev/null bs=4096 count=1 iflag=direct status=none || exit 1; done')

_STATES = {libvirt.VIR_DOMAIN_RUNNING: "running", libvirt.VIR_DOMAIN_PAUSED: "paused",
           libvirt.VIR_DOMAIN_SHUTOFF: "shut off", libvirt.VIR_DOMAIN_CRASHED: "crashed",
           libvirt.VIR_DOMAIN_BLOCKED: "blocked", libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down"}


def combine_conditions(by_host: dict[str, dict]) -> dict:
    """One point's conditions over several hosts: CPU seconds and suspended VMs add up, the other
    figures are the worst host's, quiet only when every host was; each host's own are kept too."""
    first = next(iter(by_host.values()))
    out: dict[str, Any] = {}
    for key, value in first.items():
        values = [c[key] for c in by_host.values()]
        if key == "host_quiet":
            out[key] = all(values)
        elif key == "quiet_reason":
            out[key] = "; ".join(f"{h}: {c[key]}" for h, c in by_host.items() if c[key])
        elif isinstance(value, bool):
            out[key] = any(values)
        elif key.endswith("_cpu_s") or key == "suspended_vms":
            out[key] = round(sum(values), 3)
        else:
            out[key] = max(values)
    return {**out, "host_conditions": by_host}


def _fresh(conn: libvirt.virConnect, uri: str) -> libvirt.virConnect:
    """The connection, or a new one when libvirtd dropped it (restarted, or the link broke)."""
    try:
        if conn.isAlive():
            return conn
    except libvirt.libvirtError:
        pass
    return connect(uri)


def _own_cpu_s() -> float:
    """CPU time of this process (every thread) and of the children it waited for (host fio, sync)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

