"""A user's own fio job file, run on the host and in the VMs as fio resolves it: vtb sets only the
target (each participant's file, its offset and size within its slice) and a random seed and the
percentile list where the file sets none, and leaves out its `description`. What would escape
the target is refused before anything runs, naming the file, the line and the fix."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from harness.common import paths
from harness.common.console import step
from harness.workloads import fio_options
from harness.workloads.fio_output import PERCENTILE_LIST, fio_count

PROFILES = paths.REPO / "profiles" / "fio"
# Why an option is refused, where there is more to say than fio_options.refused's rule
REASONS = {
    "filename_format": "vtb sets each participant's file", "opendir": "vtb sets each participant's file",
    "exec_prerun": "it would run a command on the host and in every VM",
    "exec_postrun": "it would run a command on the host and in every VM",
    "read_iolog": "replaying a trace is `harness run replay --trace FILE`",
    "write_iolog": "a log file would be written outside the run folder",
    "write_bw_log": "a log file would be written outside the run folder",
    "write_lat_log": "a log file would be written outside the run folder",
    "write_iops_log": "a log file would be written outside the run folder",
    "write_hist_log": "a log file would be written outside the run folder",
    "replay_redirect": "vtb sets each participant's file", "ioscheduler": "it would change the host's scheduler",
    # what would move I/O outside the range vtb computes (offset, size), or remove the target
    "fileoffset": "an absolute offset on the device: use offset (vtb moves it into the slice)",
    "filesize": "it replaces size: use size (vtb checks it against the slice)",
    "zonemode": "zones move the offset past the slice", "zonerange": "zones move the offset past the slice",
    "zoneskip": "zones move the offset past the slice", "zonesize": "zones move the offset past the slice",
    "file_append": "it writes past the end of the target", "unlink": "it would delete a file-backed target",
    "unlink_each_loop": "it would delete a file-backed target", "nrfiles": "vtb gives each participant one file",
    "kb_base": "vtb reads sizes with fio's default base (k = 1024)",
    "lat_percentiles": "vtb's samples take completion-latency (clat) percentiles",
    "clat_percentiles": "vtb's samples take completion-latency (clat) percentiles",
    # fio's alias of runtime: vtb bounds each job by the runtime it reads, under that name
    "timeout": "fio reads it as runtime, and vtb bounds the job by `runtime`: write runtime=N",
}
# A user's own disk: replaced by each participant's target, and said so in the run's log
TARGET_OPTIONS = ("filename", "directory")
# What vtb's placeholders stand for while fio resolves the file; its resolution names them again
_TARGET = "/vtb-target"
_SEED = "7270627"
_PLACEHOLDERS = {"${FIO_FILENAME}": _TARGET, "${FIO_RANDSEED}": _SEED, "${FIO_IOLOG}": _TARGET}
ALIGN = 4096   # a % offset becomes bytes rounded down to this (direct I/O needs aligned offsets)
MARGIN_S = 60
MAX_LINE_BYTES = 4096   # fio reads a job file's lines into a buffer of 8192 bytes: well under it
ON_RBD = ("a job file does not run on the rbd backend yet: the host's librbd engine would reach only the last job "
          "of the file. Fix: --backend with another backend (virtio-blk, nvme, ...)")
FILL, STEADY = "vtb-fill", "vtb-ss."   # the precondition's jobs: never measured points
OWN_JOBS = fio_options.OWN_JOBS       # what every name of vtb's own jobs starts with


@dataclass(frozen=True)
class Precondition:
    """SNIA's Solid State Storage Performance Test Specification, as fio can do it: a sequential
    fill of the target, then the workload itself until fio's steady-state detection (a slope of
    IOPS within `criterion` of the mean over `window_s`, after `ramp_s`) holds, or `max_s` passes."""
    criterion: str = "iops_slope:10%"
    window_s: int = 60
    ramp_s: int = 10
    max_s: int = 600

    def fill(self) -> list[str]:
        return ["rw=write", "bs=1m", "iodepth=16", "ioengine=libaio", "direct=1", f"runtime={self.max_s}"]

    def steady(self) -> list[str]:
        return ["time_based=1", f"runtime={self.max_s}", "ramp_time=0", f"steadystate={self.criterion}",
                f"ss_dur={self.window_s}", f"ss_ramp={self.ramp_s}"]

    def bound_s(self, jobs: int) -> float:
        """The fill and every job's steady-state run, each at most max_s."""
        return self.max_s * (1 + jobs)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_TIME = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "ms": 1e-3, "us": 1e-6}


class JobFileError(ValueError):
    """A job file vtb will not run: names the file, the line and the fix."""


@dataclass(frozen=True)
class Option:
    key: str
    value: str | None    # None for a bare option (`time_based`)
    line: int


@dataclass(frozen=True)
class Section:
    name: str
    line: int
    options: tuple[Option, ...]

    def get(self, key: str) -> Option | None:
        return next((o for o in reversed(self.options) if o.key == key), None)


# A section header as vtb and fio both read it: no bracket, and no `;` or `#` inside (vtb would take
# what follows for a comment, fio for part of the name).
_HEADER = re.compile(r"\[([^\[\];#]+)\]")


def _strict_line(raw: str, n: int, where: str) -> None:
    """A line as fio and the shell that hands it over both read it whole, or JobFileError: no control
    character (fio's check stops at a NUL that the runner's shell drops), shorter than the buffer fio
    reads a line into (the rest would be a line of its own), and a `[` only as a whole section header
    (fio starts a section at any line that begins with one)."""
    if bad := re.search(r"[\x00-\x08\x0a-\x1f\x7f]", raw):
        raise JobFileError(f"{where} line {n}: a control character ({ord(bad.group()):#04x}) that fio and the "
                           "shell that hands the file over would read differently. Fix: remove it (and save the file "
                           "with Unix line ends)")
    if len(raw.encode()) >= MAX_LINE_BYTES:
        raise JobFileError(f"{where} line {n}: {len(raw.encode())} bytes; fio reads a longer line in pieces, each as "
                           f"a line of its own. Fix: keep each line under {MAX_LINE_BYTES} bytes")
    if raw.lstrip().startswith("[") and not _HEADER.fullmatch(raw.strip()):
        raise JobFileError(f"{where} line {n}: `{raw.strip()[:60]}`: fio starts a new section at any line that "
                           "begins with `[`. Fix: close the section header, `[name]`, with no `;` or `#` in it and "
                           "nothing after it")


def _sections(text: str, where: str) -> list[Section]:
    sections: list[Section] = []
    name, start, options = None, 0, []
    for n, raw in enumerate(text.split("\n"), 1):
        _strict_line(raw, n, where)
        line = raw.split(";", 1)[0].split("#", 1)[0].strip()
        if not line:
            continue
        if m := _HEADER.fullmatch(line):
            if name is not None:
                sections.append(Section(name, start, tuple(options)))
            name, start, options = m.group(1).strip(), n, []
            continue
        if line[:7].lower() == "include":   # fio takes any line that starts so as an include
            raise JobFileError(f"{where} line {n}: an include: an included file is not checked. Fix: put its "
                               "options into this file")
        if "$" in line:
            raise JobFileError(f"{where} line {n}: `$`: fio puts environment variables and its own values ($ncpus, "
                               "$mb_memory) into a line before it reads the line. Fix: write the value out")
        if name is None:
            raise JobFileError(f"{where} line {n}: `{line}` comes before any [section]. Fix: put it under [global] "
                               "or a job's [name]")
        key, eq, value = line.partition("=")
        options.append(Option(key.strip().lower(), value.strip() if eq else None, n))
    if name is not None:
        sections.append(Section(name, start, tuple(options)))
    return sections


def _bytes(opt: Option, slice_bytes: int, where: str) -> int:
    """An option's size in bytes, in the forms vtb and fio read alike (checked against fio's own
    reading): a whole number, with fio's suffixes k m g t p (base 1024, an optional b), in hex
    (0x...), or a whole % of the participant's slice. Not KiB (fio's default reads it as 1000), not
    a fraction (fio reads 1.5m as 1), not a space before the suffix (fio reads `4 k` as 4)."""
    value = (opt.value or "").strip().lower()
    if m := re.fullmatch(r"([0-9]+)%", value):   # ASCII digits: \d and int() take others fio does not
        return int(slice_bytes * int(m.group(1)) / 100) // ALIGN * ALIGN
    if m := re.fullmatch(r"([0-9]+)(?:([kmgtp])b?)?", value):
        return int(m.group(1)) * _UNITS[m.group(2) or ""]
    if re.fullmatch(r"0x[0-9a-f]+", value):
        return int(value, 16)
    raise JobFileError(f"{where} line {opt.line}: `{opt.key}={opt.value}`: vtb reads it as bytes (4096, 4k, 512m, 1g, "
                       "0x1000) or a whole % of the participant's slice. Fix: write it so")


def _count(opt: Option | None, where: str) -> int:
    """A count (numjobs) as fio reads it (fio_count); 1 when not set."""
    if (count := fio_count(opt.value if opt else None)) is not None:
        return count
    raise JobFileError(f"{where} line {opt.line}: `{opt.key}={opt.value}`: vtb reads a count as a whole number "
                       "(8, or 0x8). Fix: write it so")


def _seconds(opt: Option, where: str) -> float:
    value = (opt.value or "").strip().lower()
    if m := re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*(ms|us|[smhd]?)", value):
        return float(m.group(1)) * _TIME[m.group(2)]
    raise JobFileError(f"{where} line {opt.line}: `{opt.key}={opt.value}` is not a time vtb reads (30, 30s, 2m). "
                       "Fix: write it so")


@dataclass(frozen=True)
class JobFile:
    """A checked job file, ready to render for any participant."""
    source: str          # the file's path (or `profile NAME`), for messages and the metadata
    text: str
    sections: tuple[Section, ...]
    slice_bytes: int
    overrides: tuple[tuple[str, str], ...] = ()   # options the user set for every job (runtime, ramp_time)
    precondition: Precondition | None = None      # a fill, then each job until steady, before the measured run
    capture: bool = False                         # each measured job writes its iolog ($FIO_IOLOG.<job>)

    @property
    def jobs(self) -> list[Section]:
        return [s for s in self.sections if s.name != "global"]

    @property
    def globals(self) -> Section | None:
        return next((s for s in self.sections if s.name == "global"), None)

    def _effective(self, job: Section, key: str) -> Option | None:
        if value := dict(self.overrides).get(key):
            return Option(key, value, 0)
        return job.get(key) or (self.globals.get(key) if self.globals else None)

    @property
    def timeout_s(self) -> float:
        """A bound on the whole file's run: every job's ramp and runtime (an overestimate where
        jobs run side by side), plus a margin."""
        total = 0.0
        for job in self.jobs:
            runtime = self._effective(job, "runtime")
            total += _seconds(runtime, self.source) if runtime else 0.0
            for key in ("ramp_time", "startdelay"):
                if opt := self._effective(job, key):
                    total += _seconds(opt, self.source)
        return total + MARGIN_S + (self.precondition.bound_s(len(self.jobs)) if self.precondition else 0)

    @property
    def ramp_s(self) -> float:
        first = self.jobs[0]
        return _seconds(opt, self.source) if (opt := self._effective(first, "ramp_time")) else 0.0

    def meta(self) -> dict:
        pre = self.precondition
        return {"job_file": self.source, "job_file_sha256": hashlib.sha256(self.text.encode()).hexdigest()[:16],
                "jobs": [j.name for j in self.jobs], **({"job_overrides": dict(self.overrides)} if self.overrides else {}),
                **({"job_file_target_replaced": self.replaced} if self.replaced else {}),
                "precondition": {"criterion": pre.criterion, "window_s": pre.window_s, "ramp_s": pre.ramp_s,
                                 "max_s": pre.max_s} if pre else None}

    def _lines(self, section: Section | None, drop: tuple[str, ...] = ()) -> list[str]:
        """A section's options as the file has them, but for what vtb sets (the overrides, once in
        [global]; the range, each job's own from extent()), `description` (a label, which fio's
        --showcmd prints quoted, and a job file reads quotes literally) and the options in `drop`."""
        over, out = dict(self.overrides), []
        for opt in section.options if section else ():
            if opt.key in over or opt.key in ("offset", "size", "description", *TARGET_OPTIONS, *drop):
                continue
            out.append(opt.key if opt.value is None else f"{opt.key}={opt.value}")
        return out

    def extent(self, job: Section, limit: int) -> tuple[int, int]:
        """(start, length) of a job's I/O inside a slice of `limit` bytes, as vtb renders them: its
        offset (0 unless set), its size (the rest of the slice unless set); refused, naming the
        line, when its clones (offset_increment x numjobs) would reach past the slice."""
        offset, size = self._effective(job, "offset"), self._effective(job, "size")
        start = _bytes(offset, limit, self.source) if offset else 0
        length = _bytes(size, limit, self.source) if size else limit - start
        increment, numjobs = self._effective(job, "offset_increment"), self._effective(job, "numjobs")
        if increment and "%" in (increment.value or ""):
            raise JobFileError(f"{self.source} line {increment.line}: offset_increment={increment.value}: a % is of the "
                               "whole device on the host. Fix: give it in bytes (4m)")
        clones = _count(numjobs, self.source)
        spread = _bytes(increment, limit, self.source) * (clones - 1) if increment else 0
        if start + spread + length > limit or length <= 0:
            culprit = size or offset or increment
            raise JobFileError(f"{self.source} line {culprit.line if culprit else job.line}: [{job.name}] reaches byte "
                               f"{start + spread + length:,}, beyond the participant's slice of {limit:,} bytes. "
                               "Fix: a smaller size or offset (or a larger fleet.disk_size_mib)")
        return start, length

    def render(self, offset: int, size: int | None = None) -> str:
        """The file for a participant whose slice starts at `offset` (0 in a VM: its disk is its
        slice) of `size` bytes (the checked slice unless given): the target in [global], and each
        job's own offset and size last in its section, inside the slice (refused, before fio
        starts, if they would not fit this participant). With a precondition, the SNIA way first: a
        sequential fill of the slice, then each job until fio finds it steady (`vtb-ss.<job>`),
        then the measured jobs."""
        limit, pre = size or self.slice_bytes, self.precondition
        head = ["filename=${FIO_FILENAME}", f"offset={offset}", f"size={limit}", *(f"{k}={v}" for k, v in self.overrides),
                *([] if self._set_anywhere("randseed") else ["randseed=${FIO_RANDSEED}"]),
                *([] if self._set_anywhere("percentile_list") else [f"percentile_list={PERCENTILE_LIST}"])]

        def ranged(job: Section) -> list[str]:   # last in the section: nothing after it moves the range
            start, length = self.extent(job, limit)
            return [f"offset={offset + start}", f"size={length}"]
        # preconditioned, the file's [global] goes into each of its jobs: the fill must not inherit it (a bssplit)
        out = ["[global]", *head, *([] if pre else self._lines(self.globals))]
        if pre:
            out += [f"[{FILL}]", *pre.fill()]
            for i, job in enumerate(self.jobs):
                parallel = i and not job.get("stonewall") and not job.get("wait_for")
                # each steady run reported alone (group_reporting would name a group by its first job only)
                alone = ("group_reporting",)
                out += [f"[{STEADY}{job.name}]", *([] if parallel else ["stonewall"]), *self._lines(self.globals, alone),
                        *self._lines(job, alone), *pre.steady(), *ranged(job)]
        inherited = self._lines(self.globals) if pre else []   # else in [global]
        for i, job in enumerate(self.jobs):
            out += [f"[{job.name}]", *(["stonewall"] if pre and i == 0 else []), *inherited, *self._lines(job),
                    *([f"write_iolog=${{FIO_IOLOG}}.{job.name}"] if self.capture else []), *ranged(job)]
        return "\n".join(out) + "\n"

    def runnable(self, offset: int, size: int | None = None) -> str:
        """What runs for the participant: its rendering (render) as fio resolves it, every option
        judged again, written back from fio's resolution, never from the user's text. Kept per
        participant: a point's repeats ask again, and its shared start should not wait on fio."""
        return _runnable(self, offset, size)

    @property
    def replaced(self) -> list[str]:
        """The lines that named the user's own disk, which each participant's target replaces."""
        return [f"line {o.line}: {o.key}={o.value}" for s in self.sections for o in s.options if o.key in TARGET_OPTIONS]

    def _set_anywhere(self, key: str) -> bool:
        return any(s.get(key) for s in self.sections)


def _check_sections(job: JobFile, sections: list, where: str, capture: bool) -> None:
    """The file's sections and options as vtb takes them: one [global] first, job names that can
    name a point and a capture, no option vtb refuses; JobFileError names the line."""
    names = [j.name for j in job.jobs]
    if len(globals_ := [s for s in sections if s.name == "global"]) > 1 or (globals_ and sections[0].name != "global"):
        second = globals_[1] if len(globals_) > 1 else globals_[0]
        raise JobFileError(f"{where} line {second.line}: a [global] after a job (fio applies it to the jobs after it "
                           "only). Fix: one [global], first")
    if capture and (dup := sorted({n for n in names if names.count(n) > 1})):
        raise JobFileError(f"{where}: the job name {', '.join(dup)} is used twice, and each job's capture is named "
                           "for it. Fix: rename one")
    for s in sections:
        if s.name.startswith("global") and s.name != "global":   # fio takes any such section as global
            raise JobFileError(f"{where} line {s.line}: [{s.name}]: fio reads a section whose name starts with "
                               "`global` as [global]. Fix: one [global], first; rename the others")
        if not re.fullmatch(r"[\w.+-]+", s.name):   # it names the job's captured iolog, and its points
            raise JobFileError(f"{where} line {s.line}: [{s.name}]: vtb takes job names of letters, digits and . _ + -. "
                               "Fix: rename the job")
        if s.name.startswith(OWN_JOBS):   # its precondition's, which the results and the clone count set apart
            raise JobFileError(f"{where} line {s.line}: [{s.name}]: vtb names its own jobs `{OWN_JOBS}...`. Fix: "
                               "rename the job")
        for opt in s.options:
            _check_option(opt, where, capture)


def _check_option(opt, where: str, capture: bool) -> None:
    """One option as vtb takes it (the refused ones, the percentiles it reports, the engines the image has)."""
    if opt.key in REASONS:
        raise JobFileError(f"{where} line {opt.line}: `{opt.key}`: {REASONS[opt.key]}. Fix: remove the line")
    if " --" in (opt.value or ""):   # fio --showcmd prints values unquoted: it would read as an option of its own
        raise JobFileError(f"{where} line {opt.line}: `{opt.key}={opt.value}`: ` --` inside a value reads as another "
                           "option in fio's own resolution of the file. Fix: remove the ` --`")
    if opt.key == "name":   # the points, captures and vtb's own precondition jobs go by the section's name
        raise JobFileError(f"{where} line {opt.line}: `name`: a job is named by its [section] header. Fix: remove "
                           "the line, and rename the section instead")
    if opt.key == "percentile_list" and not {50.0, 99.0, 99.9} <= set(_floats(opt.value)):
        raise JobFileError(f"{where} line {opt.line}: percentile_list={opt.value} lacks 50, 99 or 99.9, which "
                           "vtb's tables report. Fix: add them, or remove the line (vtb asks for 18)")
    if capture and opt.key == "numjobs" and _count(opt, where) != 1:
        raise JobFileError(f"{where} line {opt.line}: numjobs={opt.value} with --capture: fio's clones of a job "
                           "write one iolog together, interleaved. Fix: numjobs=1, or no capture")
    # before fio reads the file: fio loads an engine as it parses (ioengine=external:/lib.so)
    if opt.key == "ioengine" and (opt.value or "") not in fio_options.ENGINES:
        raise JobFileError(f"{where} line {opt.line}: ioengine={opt.value} is not in the guest image's fio. "
                           f"Fix: use one of {', '.join(sorted(fio_options.ENGINES))}")


def load(path: Path, slice_bytes: int, source: str | None = None, overrides: dict[str, str] | None = None,
         precondition: Precondition | None = None, capture: bool = False) -> JobFile:
    """The job file at `path`, checked against a participant's slice and as fio reads it
    (parse_only), with `overrides` set for every job (runtime, ramp_time); JobFileError names what
    is wrong. The JobFile keeps the text it checked: rendering never reads the file again."""
    where = source or str(path)
    try:
        text = path.read_bytes().decode("utf-8")   # as fio reads it: a \r is not a line end
    except (OSError, UnicodeDecodeError) as e:
        raise JobFileError(f"{where}: cannot read it ({e}). Fix: give a readable fio job file") from None
    sections = _sections(text, where)
    job = JobFile(where, text, tuple(sections), slice_bytes, tuple((overrides or {}).items()), precondition, capture)
    if not job.jobs:
        raise JobFileError(f"{where}: no job section (only [global], or nothing). Fix: add a job, e.g. [randread]")
    _check_sections(job, sections, where, capture)
    for j in job.jobs:
        runtime = job._effective(j, "runtime")
        if runtime is None:
            raise JobFileError(f"{where} [{j.name}] (line {j.line}): no runtime, so no bound on how long it runs. "
                               "Fix: add runtime=N (fio stops at whichever comes first, the runtime or the size)")
        _seconds(runtime, where)
        job.extent(j, slice_bytes)
    parse_only(job)   # the file as fio reads it, on this very object: what runs is what was checked
    return job


def _floats(value: str | None) -> list[float]:
    try:
        return [float(v) for v in (value or "").split(":") if v]
    except ValueError:
        return []


def parse_only(job: JobFile, fio: str = "fio") -> None:
    """The file as fio reads it, rendered for a participant at offset 0 (_judged)."""
    _judged(job, job.render(0), fio)


def _judged(job: JobFile, rendered: str, fio: str = "fio") -> list[fio_options.Resolved]:
    """A rendering of the file as fio reads it (fio_options.resolve): fio's own message where it
    does not take it, else each option it resolved on the allowlist, naming the user's line."""
    text = rendered
    for placeholder, stands_for in _PLACEHOLDERS.items():
        text = text.replace(placeholder, stands_for)
    try:
        resolved = fio_options.resolve(text, fio)
    except fio_options.FioRefused as e:
        said = str(e)
        raise JobFileError(f"{job.source}{_where_fio_says(job, said)}: fio cannot parse it; fio says:\n{said}\n"
                           "Fix: correct the option fio names") from None
    for option in resolved:
        if _ours(job, option):
            continue   # vtb's own target, seed and capture
        if why := REASONS.get(option.key) or fio_options.refused(option):
            raise JobFileError(f"{job.source}{_line_of(job, option)}: fio reads `{option.key}"
                               f"{'' if option.value is None else '=' + option.value}` there: {why}. Fix: remove it")
    if (clones := fio_options.clones(resolved)) > fio_options.MAX_NUMJOBS:
        raise JobFileError(f"{job.source}: {clones} fio processes in all (each job's numjobs, summed), more than the "
                           f"{fio_options.MAX_NUMJOBS} vtb runs for one participant. Fix: fewer jobs or clones")
    return resolved


def _ours(job: JobFile, option: fio_options.Resolved) -> bool:
    """An option that stands for one of vtb's placeholders (its target, its capture)."""
    return option.key == "filename" and option.value == _TARGET or \
        option.key == "write_iolog" and (option.value or "").startswith(f"{_TARGET}.") and job.capture


@lru_cache(maxsize=256)
def _runnable(job: JobFile, offset: int, size: int | None) -> str:
    return _written(_judged(job, job.render(offset, size)), seeded=not job._set_anywhere("randseed"))


def _written(resolved: list[fio_options.Resolved], seeded: bool) -> str:
    """fio's resolution as a job file: the options before the first job in [global], each job a
    section; vtb's placeholders named again, for the runner's environment to fill (its seed only
    where vtb `seeded` the file)."""
    out = ["[global]"]
    for o in resolved:
        value = o.value
        if o.key in ("filename", "write_iolog") and value is not None and value.startswith(_TARGET):
            value = "${FIO_FILENAME}" if o.key == "filename" else "${FIO_IOLOG}" + value[len(_TARGET):]
        elif o.key == "randseed" and value == _SEED and seeded:
            value = "${FIO_RANDSEED}"
        out.append(f"[{value}]" if o.key == "name" else o.key if value is None else f"{o.key}={value}")
    return "\n".join(out) + "\n"


def _where_fio_says(job: JobFile, said: str) -> str:
    """The user's line that fio's refusal is about, as ` line N: `key=value``, or nothing: the one
    it failed parsing, else the first option its message names (a warning, a range), never counting
    its echo of all of them."""
    if m := re.search(r"failed parsing (\S+?)=(.*)", said):
        key, value = m.group(1).lower(), m.group(2).strip()
        line = next((o.line for s in job.sections for o in s.options if o.key == key and o.value == value), None)
        return f" line {line}: `{key}={value}`" if line else f": `{key}={value}`"
    message = [line for line in said.splitlines() if " --" not in line]
    for o in (o for s in job.sections for o in s.options if o.line):
        if any(re.search(rf"\b{re.escape(o.key)}\b", line) for line in message):
            return f" line {o.line}: `{o.key}{'' if o.value is None else '=' + o.value}`"
    return ""


def _line_of(job: JobFile, option: fio_options.Resolved) -> str:
    """Where the user's file sets an option fio resolved (by its name, else its value), as ` line N`."""
    sections = [s for s in job.sections if s.name == (option.job or "global")] or list(job.sections)
    for match in (lambda o: o.key == option.key, lambda o: o.value == option.value):
        if found := next((o for s in sections for o in reversed(s.options) if match(o)), None):
            return f" line {found.line}"
    return f" [{option.job or 'global'}]"


def chosen(path: Path | None, profile_name: str | None, slice_bytes: int, **options) -> JobFile:
    """The user's job file, or the shipped profile they named, loaded as `load` does."""
    if path is not None:
        return load(path, slice_bytes, **options)
    return load(profile(profile_name), slice_bytes, f"profile {profile_name}", **options)


def refusal(make: Callable[[], JobFile]) -> str | None:
    """Why the job file cannot run (its line and the fix; fio's own parse included), or None."""
    try:
        job = make()
    except JobFileError as e:
        return str(e)
    if job.replaced:
        step(f"{job.source}: {'; '.join(job.replaced)}: each participant's own target replaces it "
             "(its disk in a VM, its slice of the device on the host)")
    return None


def profiles() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PROFILES.glob("*.fio"))}


def profile(name: str) -> Path:
    found = profiles()
    if name not in found:
        raise JobFileError(f"no fio profile named {name!r}. Fix: one of {', '.join(found)} (in {PROFILES})")
    return found[name]
