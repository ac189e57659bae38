"""A user's fio job file: checked before anything runs (every refusal names the file, the line and
the fix), rendered with only the target set, and passed by fio's own --parse-only."""
from pathlib import Path

import pytest

from harness.workloads import fio_jobfile
from harness.workloads.fio_jobfile import JobFileError, load, parse_only

SLICE = 64 << 20
TWO_JOBS = """; a QD1 probe, then a 70/30 mix
[global]
ioengine=libaio
direct=1
time_based
runtime=5

[qd1]
rw=randread
bs=4k
iodepth=1

[mix]
stonewall
rw=randrw
rwmixread=70
iodepth=32
size=50%
offset=4m
"""


def job(tmp_path, text: str, **kw):
    path = tmp_path / "my.fio"
    path.write_text(text)
    return load(path, SLICE, **kw)


def test_the_target_is_all_vtb_sets(tmp_path):
    j = job(tmp_path, TWO_JOBS)
    assert [s.name for s in j.jobs] == ["qd1", "mix"] and j.timeout_s == 5 + 5 + fio_jobfile.MARGIN_S
    text = j.render(offset=1 << 30)   # a host slot 1 GiB into the device
    lines = text.splitlines()
    head = lines[lines.index("[global]") + 1:lines.index("[global]") + 7]
    assert head == ["filename=${FIO_FILENAME}", f"offset={1 << 30}", f"size={SLICE}", "randseed=${FIO_RANDSEED}",
                    f"percentile_list={fio_jobfile.PERCENTILE_LIST}", "ioengine=libaio"]   # qd1: the whole slice
    assert f"offset={(1 << 30) + (4 << 20)}" in lines and f"size={SLICE // 2}" in lines   # mix: its part of it
    assert "rwmixread=70" in lines and "stonewall" in lines and lines[0] == "[global]"


def test_without_offset_or_size_the_slice_is_the_target(tmp_path):
    text = job(tmp_path, "[only]\nrw=read\nruntime=3\n").render(offset=4096)
    assert text.splitlines()[:5] == ["[global]", "filename=${FIO_FILENAME}", "offset=4096", f"size={SLICE}",
                                     "randseed=${FIO_RANDSEED}"]


def test_overrides_set_every_jobs_runtime(tmp_path):
    j = job(tmp_path, TWO_JOBS, overrides={"runtime": "2", "ramp_time": "0"})
    text = j.render(0)
    assert "runtime=5" not in text and text.count("runtime=2") == 1 and j.timeout_s == 2 + 2 + fio_jobfile.MARGIN_S
    assert j.meta()["jobs"] == ["qd1", "mix"] and len(j.meta()["job_file_sha256"]) == 16


@pytest.mark.parametrize("text, said", [
    ("[a]\nruntime=1\nfilename=/dev/sda\n", "my.fio line 3: `filename`: vtb sets each participant's file"),
    ("[a]\nruntime=1\ndirectory=/tmp\n", "line 3: `directory`"),
    ("[global]\nexec_prerun=rm -rf /\n[a]\nruntime=1\n", "line 2: `exec_prerun`: it would run a command"),
    ("[a]\nruntime=1\nwrite_lat_log=/tmp/x\n", "line 3: `write_lat_log`: a log file would be written outside"),
    ("[a]\nruntime=1\nioengine=rdma\n", "line 3: ioengine=rdma is not in the guest image's fio. Fix: use one of"),
    ("[a]\nruntime=1\nsize=1g\n", "line 3: [a] reaches byte 1,073,741,824, beyond the participant's slice"),
    ("[a]\nruntime=1\noffset=60m\nsize=8m\n", "line 4: [a] reaches byte 71,303,168"),
    ("[a]\nrw=read\n", "[a] (line 1): no runtime, so no bound. Fix: add runtime=N"),
    ("rw=read\n[a]\n", "line 1: `rw=read` comes before any [section]"),
    ("include other.fio\n[a]\nruntime=1\n", "line 1: `include other.fio`: an included file is not checked"),
    ("[global]\nruntime=1\n", "no job section"),
    ("[a]\nruntime=1\nsize=lots\n", "line 3: `size=lots`: vtb reads it as bytes"),
    ("[a]\nruntime=1\nsize=4KiB\n", "line 3: `size=4KiB`: vtb reads it as bytes"),
    ("[a]\nruntime=1\nfileoffset=1g\n", "line 3: `fileoffset`: an absolute offset on the device"),
    ("[a]\nruntime=1\nfilesize=1g\n", "line 3: `filesize`: it replaces size"),
    ("[a]\nruntime=1\nzonemode=strided\n", "line 3: `zonemode`: zones move the offset past the slice"),
    ("[a]\nruntime=1\nunlink=1\n", "line 3: `unlink`: it would delete a file-backed target"),
    ("[a]\nruntime=1\nnumjobs=4\noffset_increment=10%\n", "line 4: offset_increment=10%: a % is of the whole device"),
    ("[a]\nruntime=1\nnumjobs=4\noffset_increment=32m\nsize=8m\n", "line 5: [a] reaches byte 109,051,904"),
    ("[a]\nruntime=1\n[global]\nrw=write\n", "line 3: a [global] after a job"),
    ("[a]\nruntime=1\npercentile_list=90:99\n", "line 3: percentile_list=90:99 lacks 50, 99 or 99.9"),
    ("[a]\nruntime=1\nlat_percentiles=1\n", "line 3: `lat_percentiles`"),
])
def test_what_escapes_the_target_is_refused_naming_the_line(tmp_path, text, said):
    with pytest.raises(JobFileError) as e:
        job(tmp_path, text)
    assert said.split(". Fix")[0].split(", so")[0] in str(e.value) and "Fix:" in str(e.value)


def test_fio_itself_checks_the_syntax(tmp_path):
    parse_only(job(tmp_path, TWO_JOBS))
    with pytest.raises(JobFileError, match="my.fio line 3: `rw=randred`: fio cannot parse it; fio says:(.|\n)*Fix"):
        parse_only(job(tmp_path, "[a]\nruntime=1\nrw=randred\n"))


@pytest.mark.parametrize("name", sorted(fio_jobfile.profiles()))
def test_every_shipped_profile_loads_and_parses(name):
    j = load(fio_jobfile.profile(name), SLICE, f"profile {name}")
    parse_only(j)
    assert Path(fio_jobfile.profile(name)).read_text().startswith(";")   # says where its shape comes from


def test_a_profile_that_does_not_exist_lists_those_that_do():
    with pytest.raises(JobFileError, match="no fio profile named 'nope'. Fix: one of .*oltp-70-30"):
        fio_jobfile.profile("nope")


def test_a_precondition_fills_then_runs_each_job_until_steady_then_measures(tmp_path):
    pre = fio_jobfile.Precondition("iops_slope:10%", window_s=60, ramp_s=10, max_s=600)
    j = job(tmp_path, TWO_JOBS, precondition=pre)
    text = j.render(offset=0)
    sections = [line for line in text.splitlines() if line.startswith("[")]
    assert sections == ["[global]", "[vtb-fill]", "[vtb-ss.qd1]", "[vtb-ss.mix]", "[qd1]", "[mix]"]
    fill = text.split("[vtb-fill]")[1].split("[")[0]
    assert "rw=write" in fill and "bs=1m" in fill and "rwmixread" not in fill   # the file's [global] is not the fill's
    ss = text.split("[vtb-ss.qd1]")[1].split("[")[0]
    assert "steadystate=iops_slope:10%" in ss and "ss_dur=60" in ss and "rw=randread" in ss and "ioengine=libaio" in ss
    assert text.split("[qd1]")[1].splitlines()[1] == "stonewall"   # the measured jobs after every steady run
    assert j.timeout_s == 5 + 5 + fio_jobfile.MARGIN_S + 600 * 3 and j.meta()["precondition"]["window_s"] == 60
    parse_only(j)
    with pytest.raises(JobFileError, match=r"\[vtb-fill\]: vtb names its precondition's jobs so"):
        job(tmp_path, "[vtb-fill]\nruntime=1\n")


def test_a_job_with_an_offset_and_no_size_ends_at_its_slice(tmp_path):
    """The range each job gets is its own, last in its section: an offset without a size runs to
    the slice's end, never the slice's size past the offset."""
    j = job(tmp_path, "[global]\nruntime=1\n[a]\noffset=50%\n[b]\nsize=8m\n")
    text = j.render(offset=1 << 30)
    a = text.split("[a]")[1].split("[b]")[0].split()
    b = text.split("[b]")[1].split()
    assert a[-2:] == [f"offset={(1 << 30) + SLICE // 2}", f"size={SLICE // 2}"]
    assert b[-2:] == [f"offset={1 << 30}", f"size={8 << 20}"]


def test_a_participant_whose_slice_is_smaller_is_refused_before_fio_runs(tmp_path):
    j = job(tmp_path, "[a]\nruntime=1\nsize=48m\n")   # fits the checked 64 MiB slice
    with pytest.raises(JobFileError, match="reaches byte 50,331,648, beyond the participant's slice of 33,554,432"):
        j.render(offset=0, size=32 << 20)


def test_a_capture_refuses_clones_that_would_share_one_iolog(tmp_path):
    with pytest.raises(JobFileError, match="numjobs=2 with --capture"):
        job(tmp_path, "[a]\nruntime=1\nnumjobs=2\n", capture=True)
    text = job(tmp_path, "[a]\nruntime=1\n", capture=True).render(0)
    assert "write_iolog=${FIO_IOLOG}.a" in text
