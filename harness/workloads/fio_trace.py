"""I/O traces: fio's own iolog (version 2 or 3), replayed on the host and in the VMs through fio's
read_iolog with replay_redirect to each participant's target, and captured from any fio-job run
(write_iolog) into the run folder. A trace's offsets are relative to the participant's slice:
a capture is made so, and a replay moves them to the target's slice, after checking they fit."""
from __future__ import annotations

import hashlib
import re
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.workloads.fio_jobfile import MARGIN_S, JobFileError
from harness.workloads.fio_output import PERCENTILE_LIST

MAX_BYTES = 16 << 20         # sent to each participant (a guest's through its agent), or brought back
PIECE = 16 << 10             # an upload's piece: one guest-agent command each
OUT_PIECE = 1 << 20          # a capture's piece brought back
IO_ACTIONS = {"read", "write", "trim", "sync", "datasync"}
FILE_ACTIONS = {"add", "open", "close"}
_HEADER = re.compile(r"fio version ([23]) iolog")


class TraceError(JobFileError):
    """A trace vtb will not replay: names the file, the line and the fix."""


@dataclass(frozen=True)
class Trace:
    """A checked iolog, ready to replay on any participant's slice."""
    source: str
    version: int
    lines: tuple[str, ...]     # the records, after the header
    slice_bytes: int
    iodepth: int
    max_s: int                 # fio's runtime: a replay ends here even if the trace goes on
    ramp_s: float = 0.0

    @property
    def timeout_s(self) -> float:
        return self.max_s + MARGIN_S

    def meta(self) -> dict:
        text = "\n".join(self.lines)
        return {"trace": self.source, "trace_sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
                "trace_version": self.version, "trace_records": len(self.lines), "iodepth": self.iodepth,
                "jobs": ["replay"]}

    def render(self) -> str:
        """fio's job: the trace (uploaded to $FIO_TRACE) onto the participant's target."""
        return "\n".join(["[global]", f"percentile_list={PERCENTILE_LIST}", "[replay]", "read_iolog=${FIO_TRACE}",
                          "replay_redirect=${FIO_FILENAME}", "ioengine=libaio", "direct=1",
                          f"iodepth={self.iodepth}", f"runtime={self.max_s}"]) + "\n"

    def payload(self, offset: int, size: int | None = None) -> bytes:
        """The trace with its offsets moved into the slice that starts at `offset` (of `size`
        bytes: the checked slice unless given; a trace that does not fit it is refused)."""
        end = max((o + (n or 0) for o, n in (_fields(r, self.version)[1:] for r in self.lines) if o is not None),
                  default=0)
        if end > (size or self.slice_bytes):
            raise TraceError(f"{self.source}: its I/O reaches byte {end:,}, beyond this participant's slice of "
                             f"{size or self.slice_bytes:,} bytes. Fix: a larger fleet.disk_size_mib")
        return (f"fio version {self.version} iolog\n" + "\n".join(shift(line, self.version, offset)
                                                                   for line in self.lines) + "\n").encode()


def _fields(line: str, version: int) -> tuple[str, int | None, int | None]:
    """(action, offset, length) of a record; offset and length None for a file action."""
    parts = line.split()
    if version == 3:
        parts = parts[1:]   # the timestamp
    action = parts[1] if len(parts) > 1 else ""
    if len(parts) >= 4:
        return action, int(parts[2]), int(parts[3])
    return action, None, None


def shift(line: str, version: int, by: int) -> str:
    """A record with its offset moved by `by` bytes (file actions and waits unchanged)."""
    action, offset, _ = _fields(line, version)
    if offset is None or action not in IO_ACTIONS or not by:
        return line
    parts = line.split()
    parts[3 if version == 3 else 2] = str(offset + by)
    return " ".join(parts)


def load(path: Path, slice_bytes: int, *, iodepth: int = 16, max_s: int = 600) -> Trace:
    """The iolog at `path`, checked: its version, every record's form, every I/O inside the slice."""
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{where}: cannot read it ({e}). Fix: give a readable trace file") from None
    if len(data) > MAX_BYTES:
        raise TraceError(f"{where}: {len(data):,} bytes, over the {MAX_BYTES >> 20} MiB vtb sends to each participant. "
                         "Fix: a shorter capture")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise TraceError(f"{where}: not a text iolog (a blktrace capture is binary, and not replayed yet; vtb replays "
                         "fio's iolog, version 2 or 3). Fix: capture with `harness run fio-job --capture`, or with "
                         "fio's write_iolog") from None
    lines = text.splitlines()
    m = _HEADER.fullmatch(lines[0].strip()) if lines else None
    if not m:
        raise TraceError(f"{where} line 1: not a fio iolog header (`fio version 2 iolog` or `fio version 3 iolog`). "
                         "Fix: give fio's own iolog (write_iolog), or a capture of `harness run fio-job --capture`")
    version, records = int(m.group(1)), []
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            action, offset, length = _fields(line, version)
        except ValueError:
            action, offset, length = "?", None, None
        if action not in IO_ACTIONS | FILE_ACTIONS | {"wait"}:
            raise TraceError(f"{where} line {n}: `{line.strip()[:80]}` is not a version {version} iolog record. "
                             "Fix: correct or remove the line")
        if action in IO_ACTIONS and offset is not None and (offset < 0 or (length or 0) <= 0):
            raise TraceError(f"{where} line {n}: {action} at byte {offset:,} of {length} bytes: an offset below 0 or "
                             "a length that is not positive. Fix: correct or remove the line")
        if action in IO_ACTIONS and offset is not None and offset + (length or 0) > slice_bytes:
            raise TraceError(f"{where} line {n}: {action} at byte {offset:,} (+{length:,}) reaches beyond the "
                             f"participant's slice of {slice_bytes:,} bytes. Fix: a larger fleet.disk_size_mib, or a "
                             "trace captured on a slice this size")
        records.append(line.strip())
    if not any(_fields(r, version)[0] in IO_ACTIONS for r in records):
        raise TraceError(f"{where}: no I/O to replay (no read, write or trim record). Fix: give a trace with I/O")
    return Trace(where, version, tuple(records), slice_bytes, iodepth, max_s)


def relative(text: str, offset: int) -> str:
    """A captured iolog with its offsets made relative to the slice it was taken on."""
    lines = text.splitlines()
    m = _HEADER.fullmatch(lines[0].strip()) if lines else None
    if not m:
        return text
    version = int(m.group(1))
    return "\n".join([lines[0], *(shift(line, version, -offset) for line in lines[1:] if line.strip())]) + "\n"


def scratch_path(kind: str) -> str:
    """A file on a participant for one run's trace or capture, removed when the run ends (a run
    killed with SIGKILL leaves it: a guest goes with its fleet; on a host, /tmp/vtb-* by hand)."""
    return f"/tmp/vtb-{kind}-{uuid.uuid4().hex[:12]}"


def upload(node, path: str, payload: bytes) -> None:
    """The payload into a file on the node, in pieces: a guest agent under TCG takes long enough to
    parse one large command that libvirt gives up on it (seen at 170 KB), and the agent with it."""
    target = shlex.quote(path)
    node.run(["sh", "-c", f"umask 077; : > {target}"], timeout=60)
    for i in range(0, len(payload), PIECE):
        node.run(["sh", "-c", f"cat >> {target}"], input=payload[i:i + PIECE], timeout=60)


def fetch_captures(node, prefix: str) -> dict[str, str]:
    """The iologs a run wrote at `prefix`.<job> on a node, one at a time, removed there: job ->
    text. One over MAX_BYTES (a guest agent's output has a cap) is not kept, and says so."""
    listing = node.run(["sh", "-c", f'for f in {shlex.quote(prefix)}.*; do [ -e "$f" ] && stat -c "%s %n" "$f"; done'],
                       timeout=60, check=False).stdout.decode(errors="replace")
    logs = {}
    for line in listing.splitlines():
        size, _, path = line.partition(" ")
        job = path.removeprefix(prefix + ".")
        if int(size) > MAX_BYTES:
            logs[job] = f"not kept: {int(size):,} bytes, over the {MAX_BYTES >> 20} MiB vtb brings back\n"
        else:   # in pieces, like an upload: one agent reply of megabytes is as slow to pass
            logs[job] = b"".join(node.run(["sh", "-c", f"tail -c +{i + 1} {shlex.quote(path)} | head -c {OUT_PIECE}"],
                                          timeout=120, check=False).stdout
                                 for i in range(0, int(size), OUT_PIECE)).decode(errors="replace")
        node.run(["rm", "-f", path], timeout=60, check=False)
    return logs
