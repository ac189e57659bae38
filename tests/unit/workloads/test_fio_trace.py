"""Traces: fio's iolog checked against the slice (every refusal names the line and the fix), moved
into a participant's slice for a replay, and a capture made relative to the slice it came from."""
import gzip
import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.workloads import fio, fio_jobfile, fio_trace
from harness.workloads.fio_trace import TraceError, load

SLICE = 8 << 20


def test_a_real_capture_loads_and_moves_into_a_slice(fixture_text, tmp_path):
    path = tmp_path / "cap.iolog"
    path.write_text(fixture_text("fio/fio-3.33-randrw-capture.iolog"))
    trace = load(path, SLICE, iodepth=4, max_s=30)
    records = [r.decode() for r in trace.log.records()]
    assert trace.version == 3 and len(records) == 201 and trace.meta()["trace_records"] == 201
    first_io = next(line for line in records if " read " in line or " write " in line)
    ts, name, action, offset, length = first_io.split()
    moved = trace.payload(1 << 30).decode().splitlines()
    assert moved[0] == "fio version 3 iolog"
    assert f"{ts} {name} {action} {int(offset) + (1 << 30)} {length}" in moved
    assert any(line.endswith(" open") for line in moved)   # file actions unchanged
    job = trace.render()
    assert "read_iolog=${FIO_TRACE}" in job and "replay_redirect=${FIO_FILENAME}" in job and "iodepth=4" in job


def test_a_capture_is_made_relative_to_its_slice():
    text = "fio version 2 iolog\n/dev/vdb add\n/dev/vdb open\n/dev/vdb write 1052672 4096\n/dev/vdb close\n"
    kept = gzip.decompress(fio_trace.relative(text.encode(), 1 << 20, "cap")).decode()
    assert kept.splitlines()[3] == "/dev/vdb write 4096 4096"
    with pytest.raises(TraceError, match="not a fio iolog header"):
        fio_trace.relative(b"not an iolog", 5, "cap")


@pytest.mark.parametrize("text, said", [
    ("fio version 3 iolog\n1 /dev/x add\n2 /dev/x write 8388608 4096\n", "line 3: write at byte 8,388,608 (+4,096) "
                                                                         "reaches beyond the participant's slice"),
    ("hello\n", "line 1: not a fio iolog header"),
    # fio's %llu reads -4096 as 2^64 - 4096
    ("fio version 2 iolog\n/dev/x add\n/dev/x read -4096 4096\n",
     "line 3: read at byte 18,446,744,073,709,547,520"),
    ("fio version 2 iolog\n/dev/x add\n/dev/x write 0 4294967296\n", "line 3: write of 0 bytes"),   # %u: 2^32 is 0
    ("fio version 2 iolog\n/dev/x frobnicate 1 2\n",
     "line 2: `/dev/x frobnicate 1 2` is not a version 2 iolog record as fio reads it"),
    ("fio version 2 iolog\n/dev/x add\n/dev/x open\n", "no I/O to replay"),
])
def test_a_bad_trace_is_refused_naming_the_line(tmp_path, text, said):
    path = tmp_path / "t.iolog"
    path.write_text(text)
    with pytest.raises(TraceError) as e:
        load(path, SLICE)
    assert said in str(e.value) and "Fix:" in str(e.value)


def test_a_binary_or_missing_trace_is_refused(tmp_path):
    path = tmp_path / "blk.bin"
    path.write_bytes(b"\x07\x74\x61\x65" + bytes(range(200, 256)))
    with pytest.raises(TraceError, match="not a text iolog .*blktrace.*Fix"):
        load(path, SLICE)
    with pytest.raises(TraceError, match="cannot read it"):
        load(tmp_path / "none", SLICE)


def test_a_trace_that_does_not_fit_a_smaller_participant_is_refused(tmp_path):
    path = tmp_path / "t.iolog"
    path.write_text("fio version 2 iolog\n/dev/x add\n/dev/x write 6291456 4096\n")
    trace = load(path, SLICE)
    with pytest.raises(TraceError, match="reaches byte 6,295,552, beyond this participant's slice of 4,194,304"):
        trace.payload(0, 4 << 20)
    assert trace.payload(4096, SLICE).decode().splitlines()[2] == "/dev/x write 6295552 4096"


# --- read as fio reads it: fgets, then sscanf("%256s %256s %llu %u"), a timestamp first in version 3

def test_a_record_split_on_a_unit_separator_is_read_as_fio_reads_it(tmp_path):
    """fio's sscanf splits only at C's isspace: to fio this is a write at 100 GiB of a file named
    `f\\x1fwrite\\x1f0\\x1f4096`, not a write at 0 (Python's str.split() would say the latter)."""
    record = "f\x1fwrite\x1f0\x1f4096 write 107374182400 4096"
    path = tmp_path / "t.iolog"
    path.write_text(f"fio version 2 iolog\nf\x1fwrite\x1f0\x1f4096 add\n{record}\n")
    with pytest.raises(TraceError, match="line 3: write at byte 107,374,182,400 \\(\\+4,096\\) reaches beyond"):
        load(path, SLICE)
    trace = load(path, 200 << 30)
    assert trace.payload(0).decode().splitlines()[2] == record   # written again from the values read
    assert trace.payload(4096).decode().splitlines()[2] == "f\x1fwrite\x1f0\x1f4096 write 107374186496 4096"


C_SPACE = b" \t\n\v\f\r"
ULL = (1 << 64) - 1


def c_sscanf(line: bytes, conversions: str) -> list:
    """sscanf as glibc runs it, one character at a time, for conversions `s` (%256s), `q` (%llu), `u` (%u)."""
    line, values, i = line.split(b"\0")[0], [], 0
    for conv in conversions:
        while i < len(line) and line[i] in C_SPACE:
            i += 1
        if i == len(line):
            return values
        if conv == "s":
            j = i
            while j < len(line) and line[j] not in C_SPACE and j - i < 256:
                j += 1
            values.append(line[i:j])
        else:
            j = i + (line[i:i + 1] in (b"+", b"-"))
            start = j
            while j < len(line) and line[j:j + 1].isdigit():
                j += 1
            if j == start:
                return values
            n = int(line[start:j])
            value = ULL if n > ULL else (-n) % (1 << 64) if line[i:i + 1] == b"-" else n
            values.append(value % (1 << 32) if conv == "u" else value)   # strtoul's long, cut to fio's unsigned int
        i = j
    return values


def fio_reads(line: bytes, version: int):
    """What read_iolog queues for a line: (name, action, offset, length), (name, action) for a file
    action, ("wait",) for version 3's ignored wait (its timestamp kept), or None for a line it skips."""
    values = c_sscanf(line, "qssqu" if version == 3 else "ssqu")
    t, values = (values[0], values[1:]) if version == 3 and values else (0, values)
    act = values[1] if len(values) > 1 else b""
    if version == 3 and act == b"wait":
        return (t, "wait")
    if len(values) == 4 and act in (b"read", b"write", b"trim", b"sync", b"datasync", *([b"wait"] * (version == 2))):
        return (t, values[0], act.decode(), values[2], values[3])
    if len(values) == 2 and act in (b"add", b"open", b"close"):
        return (t, values[0], act.decode())
    return None


def vtb_reads(log: fio_trace.Log, i: int):
    action = fio_trace.ACTIONS[log.action[i]]
    if log.version == 3 and action == "wait":
        return (log.time[i], "wait")
    if action in fio_trace.FILE_ACTIONS:
        return (log.time[i], log.names[log.name[i]], action)
    return (log.time[i], log.names[log.name[i]], action, log.offset[i], log.length[i])


SEPARATORS = [b" ", b"\t", b"\v", b"\f", b"\r", b"\x1c", b"\x1d", b"\x1e", b"\x1f", b"\x85", b"\xa0", b"\0",
              "\u2028".encode(), "\u3000".encode(), b""]
WORDS = [b"read", b"write", b"trim", b"sync", b"datasync", b"wait", b"add", b"open", b"close", b"/dev/x", b"f",
         b"0", b"4096", b"+4096", b"-4096", b"-0", b"0x10", b"4096abc", b"8388608", b"8384512", b"4294967296",
         b"4294971392", b"18446744073709551615", b"18446744073709551616", b"99999999999999999999999", b"12.5"]
word = st.one_of(st.sampled_from(WORDS), st.binary(max_size=6), st.integers(250, 262).map(lambda n: b"n" * n),
                 st.integers(0, 1 << 70).map(lambda n: str(n).encode()))
sep = st.lists(st.sampled_from(SEPARATORS), min_size=1, max_size=3).map(b"".join)
line = st.lists(st.tuples(sep, word), max_size=7).map(lambda parts: b"".join(s + w for s, w in parts).replace(b"\n", b" "))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from([2, 3]), lines=st.lists(line, min_size=1, max_size=4), by=st.integers(0, 1 << 40))
def test_vtb_reads_every_record_as_fios_sscanf_does_and_writes_it_back_inside_the_slice(tmp_path_factory, version,
                                                                                           lines, by):
    data = b"fio version %d iolog\n" % version + b"\n".join(lines) + b"\n"
    path = tmp_path_factory.getbasetemp() / "fuzz.iolog"
    path.write_bytes(data)
    try:
        log, numbers = fio_trace.read(data, "fuzz")
    except TraceError:
        return   # refusing is always allowed; reading otherwise than fio is not
    read = [fio_reads(raw, version) for raw in lines]
    assert [vtb_reads(log, i) for i in range(len(numbers))] == [read[n - 2] for n in numbers]
    assert all(r is None for n, r in enumerate(read, 2) if n not in numbers and lines[n - 2].strip(C_SPACE))
    try:
        trace = load(path, SLICE)
    except TraceError:
        return
    for record in trace.payload(by).split(b"\n")[1:-1]:   # what fio is sent reads back inside the moved slice
        got = fio_reads(record, version)
        assert got is not None
        if len(got) == 5 and got[2] in ("read", "write", "trim", "sync", "datasync"):
            assert by <= got[3] and got[3] + got[4] <= by + SLICE


def test_a_line_fio_would_read_in_pieces_is_refused(tmp_path):
    path = tmp_path / "t.iolog"
    path.write_bytes(b"fio version 2 iolog\n/dev/x add\n/dev/x write 0 4096" + b" " * 4096 + b"x\n")
    with pytest.raises(TraceError, match="line 3: 4,116 bytes, and fio reads 4,095 at a time"):
        load(path, SLICE)


# --- captures: whole, gzipped, from a folder of the run's own

class LocalNode:
    """A node whose commands run here (what the capture does on a host or in a guest, minus fio)."""
    label = "this machine"

    def run(self, argv, *, input=None, timeout=None, check=True, env=None):
        return subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=check)


def iolog_of(records: int, at: int = 0) -> bytes:
    return b"fio version 3 iolog\n0 /dev/vdb add\n1 /dev/vdb open\n" + b"".join(
        b"%d /dev/vdb %s %d 4096\n" % (i + 2, b"write" if i % 3 else b"read", at + (i * 4096) % (7 << 20))
        for i in range(records)) + b"%d /dev/vdb close\n" % (records + 2)


def test_a_capture_over_16_mib_is_kept_whole_gzipped_and_replays(tmp_path, capsys):
    """The docs' own example captured 216 MB on a host and 18 MB in a VM: each is kept whole,
    gzipped, its size said as it comes back, and `harness run replay` takes the kept file."""
    node, at = LocalNode(), 1 << 30
    folder = fio_trace.scratch_dir(node, "iolog")
    try:
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        data = iolog_of(500_000, at)
        assert len(data) > 16 << 20
        Path(folder, "iolog.oltp").write_bytes(data)
        kept = fio_trace.fetch_captures(node, f"{folder}/iolog", ["oltp"], at)
    finally:
        subprocess.run(["rm", "-rf", "--", folder], check=True)
    assert set(kept) == {"oltp.iolog.gz"} and len(kept["oltp.iolog.gz"]) < len(data) // 5
    assert f"{len(data):,} bytes" in capsys.readouterr().out
    path = tmp_path / "oltp.iolog.gz"
    path.write_bytes(kept["oltp.iolog.gz"])
    trace = load(path, 8 << 20)
    assert trace.meta()["trace_records"] == 500_003 and trace.end <= 7 << 20
    assert trace.payload(0).splitlines()[3] == b"2 /dev/vdb read 0 4096"


def test_a_capture_that_cannot_be_kept_is_said_under_another_name_never_as_the_trace(capsys):
    node = LocalNode()
    folder = fio_trace.scratch_dir(node, "iolog")
    try:
        Path(folder, "iolog.b").write_bytes(b"fio version 3 iolog\n1 /dev/vdb write 0 4096\n")   # below its slice
        kept = fio_trace.fetch_captures(node, f"{folder}/iolog", ["a", "b"], 1 << 20)
    finally:
        subprocess.run(["rm", "-rf", "--", folder], check=True)
    assert set(kept) == {"a.capture-not-kept.txt", "b.capture-not-kept.txt"}
    assert "fio wrote no iolog" in kept["a.capture-not-kept.txt"] and "before its slice" in kept["b.capture-not-kept.txt"]
    assert "the capture of job a is not kept" in capsys.readouterr().out


def test_a_capture_is_written_in_a_private_folder_and_only_the_jobs_files_come_back(tmp_path, monkeypatch):
    """Another user could plant /tmp/vtb-iolog-<id>.x beside a guessable prefix; the iologs go
    into a fresh 0700 folder of mktemp's, and only $FIO_IOLOG.<job> of the file's jobs is read."""
    job = fio_jobfile.load(fio_jobfile.profile("qd1-latency"), 8 << 20, "profile qd1-latency", {"runtime": "1"},
                           capture=True)
    (name,) = [j.name for j in job.jobs]
    seen = {}

    def fio_runs(node, runner, locator, *, env, **_):
        folder = Path(env["FIO_IOLOG"]).parent
        seen.update(mode=stat.S_IMODE(folder.stat().st_mode), folder=folder)
        Path(f"{env['FIO_IOLOG']}.{name}").write_bytes(iolog_of(3, 4096))
        Path(f"{env['FIO_IOLOG']}.planted").write_bytes(b"fio version 2 iolog\nx write 0 1\n")
        return "{}"

    monkeypatch.setattr(fio, "run_runner", fio_runs)
    captures = {}
    fio.run(LocalNode(), job, locator="path:/dev/null", size=8 << 20, offset=4096, captures=captures)
    assert seen["mode"] == 0o700 and str(seen["folder"]).startswith("/tmp/vtb-iolog-")
    assert set(captures) == {f"{name}.iolog.gz"} and not seen["folder"].exists()
    assert gzip.decompress(captures[f"{name}.iolog.gz"]).splitlines()[3] == b"2 /dev/vdb read 0 4096"


def test_a_trace_without_an_add_record_is_refused(tmp_path):
    """fio 3.33 crashes (SIGSEGV) on a trace whose file is never added."""
    path = tmp_path / "t.iolog"
    path.write_text("fio version 2 iolog\n/dev/vdb open\n/dev/vdb read 0 4096\n/dev/vdb close\n")
    with pytest.raises(TraceError, match="no `add` record"):
        load(path, SLICE)


def test_a_wait_past_the_replay_is_refused_naming_its_line(tmp_path):
    """fio sleeps a version 2 wait out whole, past its runtime, until the point's bound kills it."""
    path = tmp_path / "t.iolog"
    for millis in (99999999999, 3600000, 60001):   # until that many ms after fio started (iolog.c)
        path.write_text("fio version 2 iolog\n/dev/vdb add\n/dev/vdb open\n/dev/vdb read 0 4096\n"
                        f"/dev/vdb wait {millis} 0\n/dev/vdb close\n")
        with pytest.raises(TraceError, match=r"line 5: a wait until [\d,]+ s after the replay starts, past its 60 s"):
            load(path, SLICE, max_s=60)
    path.write_text("fio version 2 iolog\n/dev/vdb add\n/dev/vdb open\n/dev/vdb read 0 4096\n"
                    "/dev/vdb wait 60000 0\n/dev/vdb close\n")
    assert load(path, SLICE, max_s=60).meta()["trace_records"] == 5


def test_a_gap_between_version_3_timestamps_longer_than_the_replay_is_refused(tmp_path):
    path = tmp_path / "t.iolog"
    path.write_text("fio version 3 iolog\n0 /dev/vdb add\n1 /dev/vdb open\n2 /dev/vdb read 0 4096\n"
                    "61000002 /dev/vdb read 4096 4096\n61000003 /dev/vdb close\n")
    with pytest.raises(TraceError, match=r"line 5: 61 s after the record before it, past the replay's 60 s"):
        load(path, SLICE, max_s=60)
    assert load(path, SLICE, max_s=120).meta()["trace_records"] == 5
