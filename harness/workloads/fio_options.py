"""Which fio options a user's job file may set, judged as fio reads the file: fio itself resolves
the rendered file (`fio --showcmd`, as an unprivileged user, in an empty environment and folder),
and every option it resolved, by its canonical name (an alias resolves to it), must be on the
allowlist, with its value where a value could name a file, a command, a directory or a library."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable

from harness.workloads.fio_output import fio_count

NOBODY = 65534
TIMEOUT_S = 30
ENGINES = frozenset({"libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "posixaio", "vsync", "mmap", "null"})
_ANY = None   # any value fio accepts: the option shapes the I/O, and names nothing outside the target
_BOOL = re.compile(r"[01]|true|false|yes|no|on|off", re.I)
_NUMBERS = re.compile(r"[\w.:,%/+-]*")                         # sizes, ranges, splits, percentages, lists
_PATTERN = re.compile(r'(0x[0-9a-fA-F]+|\d+|"[^"\'\\]*")(\|?(0x[0-9a-fA-F]+|\d+|"[^"\'\\]*"))*')  # never 'FILE'

# The workload's shape: what it reads and writes, how, how fast, how long, and what fio reports.
ALLOWED: dict[str, re.Pattern | frozenset | Callable[[str], str | None] | None] = {
    **dict.fromkeys((
        "stonewall", "new_group", "group_reporting", "thread",
        "rw", "rw_sequencer", "bs", "ba", "bsrange", "bssplit", "bs_unaligned", "bs_is_seq_rand", "blockalign",
        "randrepeat", "allrandrepeat", "randseed", "norandommap", "random_generator",
        "percentage_random", "ignore_error", "continue_on_error", "iodepth_batch",
        "iodepth_batch_complete_min", "iodepth_batch_complete_max", "iodepth_low", "serialize_overlap",
        "io_submit_mode", "size", "io_size", "offset", "offset_increment", "number_ios", "fsync", "fdatasync",
        "write_barrier", "direct", "atomic", "buffered", "overwrite", "loops", "startdelay", "runtime", "time_based",
        "ramp_time", "clocksource", "do_verify", "verify_interval", "verify_offset", "verify_fatal",
        "verify_async", "verify_backlog", "verify_backlog_batch", "verify_only", "experimental_verify",
        "trim_percentage", "trim_verify_zero", "trim_backlog", "trim_backlog_batch", "rwmixread", "rwmixwrite",
        "thinktime_spin", "thinktime_blocks", "thinktime_blocks_type",
        "thinktime_iotime", "rate", "rate_min", "rate_process", "rate_cycle", "rate_ignore_thinktime", "rate_iops",
        "rate_iops_min", "max_latency", "latency_target", "latency_window", "latency_percentile", "latency_run",
        "invalidate", "sync", "pre_read", "cpumask", "cpus_allowed", "cpus_allowed_policy", "end_fsync",
        "fsync_on_close", "exitall", "exit_what", "exitall_on_error", "zero_buffers", "refill_buffers",
        "scramble_buffers", "buffer_compress_percentage", "buffer_compress_chunk", "dedupe_percentage",
        "dedupe_mode", "dedupe_working_set_percentage", "dedupe_global", "percentile_list", "gtod_reduce",
        "disable_lat", "disable_clat", "disable_slat", "disable_bw_measurement", "unified_rw_reporting",
        "fadvise_hint", "fallocate", "file_service_type", "mem_align", "iomem_align", "create_serialize",
        "create_fsync", "create_on_open",
        "fill_device",   # ENOSPC ends the job, not an error; vtb's size still ends it at the slice
        "steadystate", "steadystate_duration", "steadystate_ramp_time",
        # the engines' own (io_uring, libaio, pvsync2)
        "hipri", "hipri_percentage",   # not cmdprio*: a class per command, real time among them
        "fixedbufs", "registerfiles", "sqthread_poll", "sqthread_poll_cpu", "nonvectored", "uncached", "nowait",
        "force_async", "userspace_reap"), _NUMBERS),
    "description": _ANY, "name": re.compile(r"[\w.+-]+"), "wait_for": re.compile(r"[\w.+-]+"),
    "verify_state_save": _BOOL, "verify": re.compile(r"\w+"), "random_distribution": re.compile(r"[\w.:,/%]+"),
    "ioengine": ENGINES,
    "mem": frozenset({"malloc", "shm", "shmhuge", "mmap", "mmapshared"}),   # never mmap:FILE
    "buffer_pattern": _PATTERN, "verify_pattern": _PATTERN,
    # What a participant may take of its host: never a higher priority than the harness's, and
    # clones, depth and think time that fit a point's bound.
    "nice": lambda v: _within(fio_count(v), 0, 19, "a nice of 0 to 19 (never above normal priority)"),
    "prio": lambda v: _within(fio_count(v), 0, 7, "a priority of 0 to 7 within its class"),
    "prioclass": lambda v: _within(fio_count(v), 0, 3, "class 0, 2 or 3 (never 1, real time)", refuse=(1,)),
    "numjobs": lambda v: _within(fio_count(v), 1, MAX_NUMJOBS, f"1 to {MAX_NUMJOBS} clones of a job"),
    "iodepth": lambda v: _within(fio_count(v), 1, MAX_IODEPTH, f"a queue depth of 1 to {MAX_IODEPTH}"),
    "thinktime": lambda v: _within(_microseconds(v), 0, MAX_THINKTIME_US,
                                   f"a think time of at most {MAX_THINKTIME_US // 1_000_000} s"),
}


OWN_JOBS = "vtb-"   # vtb's own jobs' names (a precondition's); a user's job may not start so
MAX_NUMJOBS = 64
MAX_IODEPTH = 1024
MAX_THINKTIME_US = 1_000_000


def _microseconds(value: str) -> int | None:
    """A time as fio reads thinktime: microseconds, or with a unit us, ms or s."""
    m = re.fullmatch(r"([0-9]+)(us|ms|s)?", value.strip().lower())
    return int(m.group(1)) * {None: 1, "us": 1, "ms": 1000, "s": 1_000_000}[m.group(2)] if m else None


def _within(number: int | None, least: int, most: int, what: str, refuse: tuple = ()) -> str | None:
    if number is None or not least <= number <= most or number in refuse:
        return f"vtb takes {what}"
    return None


@dataclass(frozen=True)
class Resolved:
    job: str | None      # None for the options fio reads before the first job (the global ones)
    key: str             # fio's canonical name
    value: str | None    # None for a bare option


class FioRefused(ValueError):
    """fio did not take the file: its own message."""


def resolve(text: str, fio: str = "fio") -> list[Resolved]:
    """The options fio resolves from a job file, in order: fio's own parse (`--showcmd`, which
    runs nothing), as user nobody with no environment, in an empty folder."""
    with tempfile.TemporaryDirectory(prefix="vtb-fio-check-") as cwd:
        os.chmod(cwd, 0o755)
        # only root can change users; anyone else runs fio as themselves
        drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"] if os.geteuid() == 0 else []
        try:
            done = subprocess.run([*drop, fio, "--showcmd", "-"], input=text, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, env={"PATH": "/usr/bin:/bin"}, cwd=cwd)
        except FileNotFoundError:
            raise FioRefused("fio (or setpriv) is not installed here to check it. Fix: make testbed up") from None
        except subprocess.TimeoutExpired:
            raise FioRefused(f"fio --showcmd did not answer within {TIMEOUT_S} s") from None
    said = "\n".join(line for line in (done.stdout + done.stderr).splitlines() if line.strip())
    if done.returncode != 0 or re.search(r"failed parsing|dropped|Bad option", said):
        raise FioRefused(said.strip()[-1500:])
    # Exactly one line of options, or nothing is judged: fio prints warnings (a deprecated option's)
    # into that line, each ending a line of its own, and options read past one would go unjudged.
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.stderr.strip() or len(lines) != 1 or not (lines[0].rstrip() == "fio" or lines[0].startswith("fio --")):
        raise FioRefused(f"fio said more than the options it read: {said.strip()[-1500:]}")
    return _options(lines[0][len("fio"):])


def _options(line: str) -> list[Resolved]:
    """fio's --showcmd line as options. fio prints ` --name[=value]` for each, values unquoted: a
    value that itself holds ` --` is split here into more options, which are then judged too, so a
    split never hides an option."""
    out, job = [], None
    for part in re.split(r" --(?=[\w-]+(?:=| |$))", line)[1:]:
        key, eq, value = part.rstrip().partition("=")
        if key == "name":
            job = value
        out.append(Resolved(job, key, value if eq else None))
    return out


def clones(resolved: list[Resolved]) -> int:
    """The fio processes the resolved options start: each job's numjobs (its own, else the global
    one, else 1), summed over the user's jobs (vtb's own `vtb-` precondition jobs run before them)."""
    counts: list[str | None] = []   # per job, in order: two jobs may share a name
    global_n, ours = None, []
    for o in resolved:
        if o.key == "name":
            counts.append(global_n)
            ours.append((o.value or "").startswith(OWN_JOBS))
        elif o.key == "numjobs":
            if counts:
                counts[-1] = o.value
            else:
                global_n = o.value
    return sum(fio_count(n) or 1 for n, vtbs in zip(counts, ours) if not vtbs)


def refused(option: Resolved) -> str | None:
    """Why vtb does not run this option, or None."""
    if option.key not in ALLOWED:
        return "vtb runs only options that shape the I/O on the target it gives (docs/workloads.md lists them)"
    rule, value = ALLOWED[option.key], (option.value or "").strip()
    if rule is None or option.value is None:
        return None
    if callable(rule):
        return rule(value)
    ok = value in rule if isinstance(rule, frozenset) else rule.fullmatch(value)
    if not ok:
        allowed = ", ".join(sorted(rule)) if isinstance(rule, frozenset) else "a number, size, range or list"
        return f"its value may name a file, a command or a library; vtb takes {allowed}"
    return None
