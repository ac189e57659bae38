"""Traces: fio's iolog checked against the slice (every refusal names the line and the fix), moved
into a participant's slice for a replay, and a capture made relative to the slice it came from."""
import pytest

from harness.workloads import fio_trace
from harness.workloads.fio_trace import TraceError, load

SLICE = 8 << 20


def test_a_real_capture_loads_and_moves_into_a_slice(fixture_text, tmp_path):
    path = tmp_path / "cap.iolog"
    path.write_text(fixture_text("fio/fio-3.33-randrw-capture.iolog"))
    trace = load(path, SLICE, iodepth=4, max_s=30)
    assert trace.version == 3 and len(trace.lines) == 201 and trace.meta()["trace_records"] == 201
    first_io = next(line for line in trace.lines if " read " in line or " write " in line)
    ts, name, action, offset, length = first_io.split()
    moved = trace.payload(1 << 30).decode().splitlines()
    assert moved[0] == "fio version 3 iolog"
    assert f"{ts} {name} {action} {int(offset) + (1 << 30)} {length}" in moved
    assert any(line.endswith(" open") for line in moved)   # file actions unchanged
    job = trace.render()
    assert "read_iolog=${FIO_TRACE}" in job and "replay_redirect=${FIO_FILENAME}" in job and "iodepth=4" in job


def test_a_capture_is_made_relative_to_its_slice():
    text = "fio version 2 iolog\n/dev/vdb add\n/dev/vdb open\n/dev/vdb write 1052672 4096\n/dev/vdb close\n"
    assert fio_trace.relative(text, 1 << 20).splitlines()[3] == "/dev/vdb write 4096 4096"
    assert fio_trace.relative("not an iolog", 5) == "not an iolog"


@pytest.mark.parametrize("text, said", [
    ("fio version 3 iolog\n1 /dev/x add\n2 /dev/x write 8388608 4096\n", "line 3: write at byte 8,388,608 (+4,096) "
                                                                         "reaches beyond the participant's slice"),
    ("hello\n", "line 1: not a fio iolog header"),
    ("fio version 2 iolog\n/dev/x add\n/dev/x read -4096 4096\n", "line 3: read at byte -4,096 of 4096 bytes: an offset "
                                                                  "below 0"),
    ("fio version 2 iolog\n/dev/x frobnicate 1 2\n", "line 2: `/dev/x frobnicate 1 2` is not a version 2 iolog record"),
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
