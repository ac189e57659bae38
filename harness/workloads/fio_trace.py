"""I/O traces: fio's own iolog (version 2 or 3), replayed on the host and in the VMs through fio's
read_iolog with replay_redirect to each participant's target, and captured from any fio-job run
(write_iolog) into the run folder, gzipped. A trace's offsets are relative to the participant's
slice: a capture is made so, and a replay moves them to the target's slice, after checking they fit.

A trace is read as fio's read_iolog reads it (fgets, then sscanf's `%256s %256s %llu %u`, with a
timestamp first in version 3: fields end only at C's isspace, numbers are glibc's strtoull), and
every record sent or kept is written again from the values read: never a line passed on as given."""
from __future__ import annotations

import gzip
import hashlib
import io
import re
import shlex
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from harness.common.console import step, warn
from harness.workloads.fio_jobfile import MARGIN_S, JobFileError
from harness.workloads.fio_output import PERCENTILE_LIST

MAX_BYTES = 1 << 30          # a trace's records (uncompressed) vtb reads and sends: a 30 s capture on a host is 216 MB
PIECE = 16 << 10             # an upload's piece: one guest-agent command each
OUT_PIECE = 1 << 20          # a capture's piece brought back
LINE_MAX, HEADER_MAX = 4095, 255   # what one fgets of read_iolog (4096) and of its header (256) takes
IO_ACTIONS = ("read", "write", "trim", "sync", "datasync")
FILE_ACTIONS = ("add", "open", "close")
ACTIONS = (*IO_ACTIONS, "wait", *FILE_ACTIONS)
_HEADERS = {b"fio version 2 iolog": 2, b"fio version 3 iolog": 3}   # fio compares the line's start only
_GZIP = b"\x1f\x8b"

_WS = rb"[ \t\n\v\f\r]*"                        # C's isspace, all sscanf skips: not \x1c-\x1f, not Unicode's
_STR = _WS + rb"([^ \t\n\v\f\r]{1,256})"        # %256s: a longer word goes on into the next conversion
_NUM = _WS + rb"([+-]?[0-9]+)"                  # %llu, %u: base 10, a sign allowed


def _scanner(*conversions: bytes) -> re.Pattern:
    """sscanf as a pattern: each conversion matched only if the ones before it were (r = how many)."""
    pattern = b""
    for c in reversed(conversions):
        pattern = c + (b"(?:" + pattern + b")?" if pattern else b"")
    return re.compile(pattern)


_SCAN = {2: _scanner(_STR, _STR, _NUM, _NUM), 3: _scanner(_NUM, _STR, _STR, _NUM, _NUM)}


def _ull(digits: bytes) -> int:
    """%llu (glibc's strtoull): a negative number wraps, one past 2^64 - 1 stops there."""
    n = int(digits)
    return (1 << 64) - 1 if abs(n) >= 1 << 64 else n % (1 << 64)


def _u(digits: bytes) -> int:
    """%u: strtoul's 64-bit value cut to the 32 bits of fio's `bytes`."""
    return _ull(digits) % (1 << 32)


class TraceError(JobFileError):
    """A trace vtb will not replay: names the file, the line and the fix."""


@dataclass(frozen=True, eq=False)
class Log:
    """An iolog's records as fio read them, in columns: a capture of millions holds little memory."""
    version: int
    names: tuple[bytes, ...]    # the files the records name (replay_redirect sends every one to the target)
    name: array                 # per record: its index in names
    action: array               # its index in ACTIONS
    time: array                 # version 3: microseconds since the capture began
    offset: array               # an I/O's byte; a version 2 wait's milliseconds since fio started
    length: array

    def records(self, by: int = 0) -> Iterator[bytes]:
        """Every record written again from its values, an I/O's offset moved by `by` bytes."""
        names, v3 = self.names, self.version == 3
        for name, act, t, offset, length in zip(self.name, self.action, self.time, self.offset, self.length):
            action = ACTIONS[act]
            head = b"%d %s %s" % (t, names[name], action.encode()) if v3 else b"%s %s" % (names[name], action.encode())
            if action in IO_ACTIONS:
                yield b"%s %d %d" % (head, offset + by, length)
            elif action == "wait" and not v3:   # version 3 ignores a wait, but its timestamp still counts
                yield b"%s %d %d" % (head, offset, length)
            else:
                yield head

    def text(self, by: int = 0) -> bytes:
        return b"fio version %d iolog\n" % self.version + b"".join(r + b"\n" for r in self.records(by))

    def ios(self) -> Iterator[tuple[str, int, int, int]]:
        """(action, offset, length, index) of every I/O record."""
        for i, (act, offset, length) in enumerate(zip(self.action, self.offset, self.length)):
            if act < len(IO_ACTIONS):
                yield IO_ACTIONS[act], offset, length, i


def _version(first: bytes, where: str) -> int:
    """The iolog version its header line says, or why it is no iolog."""
    version = next((v for head, v in _HEADERS.items() if first.startswith(head)), None)
    if version is None or len(first) > HEADER_MAX:
        try:
            first.decode()
        except UnicodeDecodeError:
            raise TraceError(f"{where}: not a text iolog (a blktrace capture is binary, and not replayed yet; vtb "
                             "replays fio's iolog, version 2 or 3). Fix: capture with `harness run fio-job --capture`, "
                             "or with fio's write_iolog") from None
        raise TraceError(f"{where} line 1: not a fio iolog header (`fio version 2 iolog` or `fio version 3 iolog`, in "
                         f"at most {HEADER_MAX} bytes). Fix: give fio's own iolog (write_iolog), or a capture of "
                         "`harness run fio-job --capture`")
    return version


def _record_form(fields: list[bytes], version: int, line: bytes, where: str, n: int) -> tuple[str, bool]:
    """A record's action and whether it is an I/O (else a file action or a skipped wait); a line
    that is neither, refused naming it."""
    action = fields[1].decode(errors="replace") if len(fields) > 1 else ""
    io_form = len(fields) == 4 and action in (*IO_ACTIONS, *(("wait",) if version == 2 else ()))
    file_form = len(fields) == 2 and action in FILE_ACTIONS
    ignored_wait = version == 3 and action == "wait"   # fio skips it, after taking its timestamp
    if not (io_form or file_form or ignored_wait):
        shown = line.decode(errors="replace").strip()[:80]
        raise TraceError(f"{where} line {n}: `{shown}` is not a version {version} iolog record as fio reads it "
                         "(its fields are separated by spaces or tabs only). Fix: correct or remove the line")
    return action, io_form


def read(data: bytes, where: str) -> tuple[Log, list[int]]:
    """An iolog read line by line as fio reads it -> (its records, each record's line number).
    A line fio would skip with an error, or read in pieces, is refused naming it."""
    if data.startswith(_GZIP):
        data = _gunzip(data, where)
    first, _, rest = data.partition(b"\n")
    version = _version(first, where)
    scan, names, ix = _SCAN[version], {}, {a: i for i, a in enumerate(ACTIONS)}
    name, action_ix, time, offsets, lengths, numbers = array("I"), array("B"), array("Q"), array("Q"), array("Q"), []
    for n, line in enumerate(rest.split(b"\n"), 2):
        if len(line) > LINE_MAX:
            raise TraceError(f"{where} line {n}: {len(line):,} bytes, and fio reads {LINE_MAX:,} at a time (the rest "
                             "would be another record). Fix: correct or remove the line")
        line = line.partition(b"\0")[0]   # sscanf stops at a NUL
        m = scan.match(line)
        fields = [f for f in m.groups() if f is not None] if m else []
        if not fields and not line.strip(b" \t\n\v\f\r"):
            continue   # a blank line: fio skips it
        t, fields = (_ull(fields[0]), fields[1:]) if version == 3 and fields else (0, fields)
        action, io_form = _record_form(fields, version, line, where, n)
        name.append(names.setdefault(fields[0], len(names)))
        action_ix.append(ix[action])
        time.append(t)
        offsets.append(_ull(fields[2]) if io_form else 0)
        lengths.append(_u(fields[3]) if io_form else 0)
        numbers.append(n)
    return Log(version, tuple(names), name, action_ix, time, offsets, lengths), numbers


def _gunzip(data: bytes, where: str) -> bytes:
    """A gzipped iolog (a capture of vtb's), opened: fio reads only plain text, and at most MAX_BYTES of it here."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            text = f.read(MAX_BYTES + 1)
    except (OSError, EOFError) as e:
        raise TraceError(f"{where}: a gzip file that does not open ({e}). Fix: give the whole capture") from None
    if len(text) > MAX_BYTES:
        raise TraceError(f"{where}: over the {MAX_BYTES >> 20} MiB of records vtb sends to each participant, opened. "
                         "Fix: a shorter capture")
    return text


@dataclass(frozen=True, eq=False)
class Trace:
    """A checked iolog, ready to replay on any participant's slice."""
    source: str
    log: Log
    end: int                   # the byte its I/O reaches
    sha256: str
    slice_bytes: int
    iodepth: int
    max_s: int                 # fio's runtime: a replay ends here even if the trace goes on
    ramp_s: float = 0.0

    @property
    def version(self) -> int:
        return self.log.version

    @property
    def timeout_s(self) -> float:
        return self.max_s + MARGIN_S

    def meta(self) -> dict:
        return {"trace": self.source, "trace_sha256": self.sha256, "trace_version": self.version,
                "trace_records": len(self.log.action), "iodepth": self.iodepth, "jobs": ["replay"]}

    def render(self) -> str:
        """fio's job: the trace (uploaded to $FIO_TRACE) onto the participant's target, read in chunks
        (fio would otherwise hold every record of a long capture at once)."""
        return "\n".join(["[global]", f"percentile_list={PERCENTILE_LIST}", "[replay]", "read_iolog=${FIO_TRACE}",
                          "read_iolog_chunked=1", "replay_redirect=${FIO_FILENAME}", "ioengine=libaio", "direct=1",
                          f"iodepth={self.iodepth}", f"runtime={self.max_s}"]) + "\n"

    def payload(self, offset: int, size: int | None = None) -> bytes:
        """The trace with its offsets moved into the slice that starts at `offset` (of `size`
        bytes: the checked slice unless given; a trace that does not fit it is refused)."""
        if self.end > (size or self.slice_bytes):
            raise TraceError(f"{self.source}: its I/O reaches byte {self.end:,}, beyond this participant's slice of "
                             f"{size or self.slice_bytes:,} bytes. Fix: a larger fleet.disk_size_mib")
        return self.log.text(offset)


def _check_files_and_waits(log: Log, numbers: list[int], where: str, max_s: int) -> None:
    """What fio needs to replay the trace within the point's runtime: a file added (fio 3.33 crashes
    on a trace without an `add` record), and nothing that makes fio sleep past the runtime, until
    the point's bound stops it: a version 2 wait (until that many milliseconds after fio started)
    past the runtime, or a gap between version 3 timestamps longer than it."""
    if ACTIONS.index("add") not in log.action:
        raise TraceError(f"{where}: no `add` record, which names the file its I/O goes to (fio crashes on such a "
                         "trace). Fix: add a line `<file> add` before the first I/O")
    if log.version == 3:   # fio sleeps out the gap between two records' timestamps (microseconds)
        for i, (before, after) in enumerate(zip([0, *log.time], log.time)):
            if after - before > max_s * 1_000_000:
                raise TraceError(f"{where} line {numbers[i]}: {(after - before) / 1e6:,.0f} s after the record "
                                 f"before it, past the replay's {max_s} s: fio would sleep past its runtime. Fix: "
                                 "close the gap, or a longer --runtime")
        return
    wait = ACTIONS.index("wait")
    for i, (act, millis) in enumerate(zip(log.action, log.offset)):
        if act == wait and millis > max_s * 1000:
            raise TraceError(f"{where} line {numbers[i]}: a wait until {millis / 1e3:,.0f} s after the replay "
                             f"starts, past its {max_s} s: fio would sleep past its runtime. Fix: shorten the wait, "
                             "or a longer --runtime")


def load(path, slice_bytes: int, *, iodepth: int = 16, max_s: int = 600) -> Trace:
    """The iolog at `path` (plain, or gzipped as vtb keeps captures), checked: its version, every
    record's form, every I/O inside the slice."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise TraceError(f"{where}: cannot read it ({e}). Fix: give a readable trace file") from None
    if len(data) > MAX_BYTES:
        raise TraceError(f"{where}: over the {MAX_BYTES >> 20} MiB vtb sends to each participant. Fix: a shorter capture")
    log, numbers = read(data, where)
    end = 0
    for action, offset, length, i in log.ios():
        if length == 0 and action in ("read", "write", "trim"):
            raise TraceError(f"{where} line {numbers[i]}: {action} of 0 bytes at byte {offset:,}. "
                             "Fix: correct or remove the line")
        if offset + length > slice_bytes:
            raise TraceError(f"{where} line {numbers[i]}: {action} at byte {offset:,} (+{length:,}) reaches beyond "
                             f"the participant's slice of {slice_bytes:,} bytes. Fix: a larger fleet.disk_size_mib, "
                             "or a trace captured on a slice this size")
        end = max(end, offset + length)
    if not any(a in ("read", "write", "trim") for a, *_ in log.ios()):
        raise TraceError(f"{where}: no I/O to replay (no read, write or trim record). Fix: give a trace with I/O")
    _check_files_and_waits(log, numbers, where, max_s)
    digest = hashlib.sha256()
    for record in log.records():
        digest.update(record + b"\n")
    return Trace(where, log, end, digest.hexdigest()[:16], slice_bytes, iodepth, max_s)


def relative(data: bytes, offset: int, where: str) -> bytes:
    """A captured iolog with its offsets made relative to the slice it was taken on, gzipped."""
    log, numbers = read(data, where)
    if below := next(((a, o, numbers[i]) for a, o, _, i in log.ios() if o < offset), None):
        raise TraceError(f"{where} line {below[2]}: {below[0]} at byte {below[1]:,}, before its slice at {offset:,}")
    return gzip.compress(log.text(-offset), compresslevel=6)


def scratch_dir(node, kind: str) -> str:
    """A folder of this run's own on a node (mktemp -d: 0700, a fresh name), for a trace or the
    iologs: another user can plant nothing in it. Removed when the run ends (a run killed with
    SIGKILL leaves it: a guest goes with its fleet; on a host, /tmp/vtb-* by hand)."""
    made = node.run(["mktemp", "-d", f"/tmp/vtb-{kind}-XXXXXXXXXXXX"], timeout=60).stdout.decode().strip()
    if not re.fullmatch(rf"/tmp/vtb-{kind}-[A-Za-z0-9]{{12}}", made):
        raise TraceError(f"{node.label}: mktemp -d made `{made[:80]}`, not a folder under /tmp")
    return made


def upload(node, path: str, payload: bytes) -> None:
    """The payload into a file on the node, gzipped on the way, in pieces: a guest agent under TCG
    takes long enough to parse one large command that libvirt gives up on it (seen at 170 KB), and
    the agent with it."""
    packed, target = gzip.compress(payload, compresslevel=6), shlex.quote(path + ".gz")
    node.run(["sh", "-c", f"umask 077; : > {target}"], timeout=60)
    for i in range(0, len(packed), PIECE):
        node.run(["sh", "-c", f"cat >> {target}"], input=packed[i:i + PIECE], timeout=60)
    node.run(["gzip", "-d", "--", path + ".gz"], timeout=600)


def fetch_captures(node, prefix: str, jobs: list[str], offset: int) -> dict[str, bytes | str]:
    """The iologs a run wrote at `prefix`.<job> on a node, each made relative to the slice at
    `offset` and kept whole, gzipped: <job>.iolog.gz -> bytes. Only the named jobs' files are read.
    One that cannot be kept is said in the log and in <job>.capture-not-kept.txt, never under the
    trace's own name."""
    kept: dict[str, bytes | str] = {}
    for job in jobs:
        path = f"{prefix}.{job}"
        try:
            kept[f"{job}.iolog.gz"] = relative(_bring_back(node, job, path), offset, f"{node.label}: {job}'s capture")
        except (TraceError, OSError, EOFError, ValueError) as e:
            warn(f"{node.label}: the capture of job {job} is not kept: {e}")
            kept[f"{job}.capture-not-kept.txt"] = f"{e}\n"
    return kept


def _bring_back(node, job: str, path: str) -> bytes:
    """One iolog, gzipped on its node (fio's iologs shrink tenfold) and brought back in pieces,
    like an upload: one agent reply of megabytes is as slow to pass."""
    q = shlex.quote(path)
    said = node.run(["sh", "-c", f'[ -f {q} ] || exit 0; s=$(stat -c %s {q}) && gzip -1 -- {q} && '
                                 f'echo "$s $(stat -c %s {q}.gz)"'], timeout=600, check=False).stdout.decode().split()
    if len(said) != 2:
        raise TraceError("fio wrote no iolog for it (the job did not run, or stopped first)")
    size, packed = int(said[0]), int(said[1])
    step(f"{node.label}: the capture of job {job}: {size:,} bytes ({packed:,} gzipped), bringing it back")
    data = b"".join(node.run(["sh", "-c", f"tail -c +{i + 1} {q}.gz | head -c {OUT_PIECE}"], timeout=120,
                             check=False).stdout for i in range(0, packed, OUT_PIECE))
    if len(data) != packed:
        raise TraceError(f"{len(data):,} of its {packed:,} gzipped bytes came back")
    return data   # gzipped: read() opens it, bounded
