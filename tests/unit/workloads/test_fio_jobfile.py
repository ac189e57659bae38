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
    ("[global]\nexec_prerun=rm -rf /\n[a]\nruntime=1\n", "line 2: `exec_prerun`: it would run a command"),
    ("[a]\nruntime=1\nwrite_lat_log=/tmp/x\n", "line 3: `write_lat_log`: a log file would be written outside"),
    ("[a]\nruntime=1\nioengine=rdma\n", "line 3: ioengine=rdma is not in the guest image's fio. Fix: use one of"),
    ("[a]\nruntime=1\nsize=1g\n", "line 3: [a] reaches byte 1,073,741,824, beyond the participant's slice"),
    ("[a]\nruntime=1\noffset=60m\nsize=8m\n", "line 4: [a] reaches byte 71,303,168"),
    ("[a]\nrw=read\n", "[a] (line 1): no runtime, so no bound. Fix: add runtime=N"),
    ("rw=read\n[a]\n", "line 1: `rw=read` comes before any [section]"),
    ("include other.fio\n[a]\nruntime=1\n", "line 1: an include: an included file is not checked"),
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
    for name in ("vtb-fill", "vtb-x"):   # a user's job counts among the clones, vtb's own does not
        with pytest.raises(JobFileError, match=rf"\[{name}\]: vtb names its own jobs `vtb-...`"):
            job(tmp_path, f"[{name}]\nruntime=1\n")


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


# --- judged as fio reads the file -------------------------------------------------------------
def refusal_of(tmp_path, text: str) -> str:
    with pytest.raises(JobFileError) as e:
        parse_only(job(tmp_path, text))
    return str(e.value)


@pytest.mark.parametrize("line", ["exec_pre${X}run=touch /tmp/x", "filena${X}me=/dev/sda", "ioeng${X}ine=exec",
                                  "bs=$pagesize", "numjobs=${ncpus}"])
def test_a_dollar_is_refused_since_fio_substitutes_it_before_reading_the_line(tmp_path, line):
    said = refusal_of(tmp_path, f"[a]\nruntime=1\n{line}\n")
    assert "my.fio line 3: `$`" in said and "Fix: write the value out" in said


@pytest.mark.parametrize("line", ["include other.fio", "include=/etc/shadow", "include\t/etc/shadow", "Include x",
                                  "  INCLUDE /etc/shadow"])
def test_an_include_in_any_form_is_refused_without_reading_it(tmp_path, line):
    said = refusal_of(tmp_path, f"{line}\n[a]\nruntime=1\n")
    assert "line 1: an include" in said and "shadow" not in said and "root:" not in said


@pytest.mark.parametrize("line, said", [
    ("mem=mmap:/tmp/vtb-x", "fio reads `mem=mmap:/tmp/vtb-x` there: its value may name a file"),
    ("iomem=mmap:/tmp/vtb-x", "fio reads `mem=mmap:/tmp/vtb-x` there"),              # an alias, resolved by fio
    ("cgroup=../../x", "fio reads `cgroup=../../x` there: vtb runs only options that shape the I/O"),
    ("buffer_pattern='/etc/passwd'", "fio reads `buffer_pattern='/etc/passwd'` there: its value may name a file"),
    ("verify_state_load=1", "fio reads `verify_state_load=1`"),
    ("lockmem=1g", "fio reads `lockmem=1g`"),
    ("ioengine=exec", "ioengine=exec is not in the guest image's fio"),
    ("ioengine=external:/tmp/x.so", "ioengine=external:/tmp/x.so is not in the guest image's fio"),
    ("exec_prerun=touch /tmp/x", "`exec_prerun`: it would run a command"),
    # what would take more of the host than a point: bounded on fio's own reading
    ("nice=-20", "nice: max value out of range"),   # fio's own range refuses some before vtb's does
    ("nice=-1", "fio reads `nice=-1` there: vtb takes a nice of 0 to 19"),
    ("prioclass=1", "fio reads `prioclass=1` there: vtb takes class 0, 2 or 3 (never 1, real time)"),
    ("prio=9", "`prio=9`: fio cannot parse it"),
    ("numjobs=4096", "vtb takes 1 to 64 clones of a job"),
    ("iodepth=65536", "vtb takes a queue depth of 1 to 1024"),
    ("thinktime=1000000000", "vtb takes a think time of at most 1 s"),
    ("thinktime=2s", "vtb takes a think time of at most 1 s"),
])
def test_options_that_reach_outside_the_target_are_refused_by_the_name_fio_resolves(tmp_path, line, said):
    got = refusal_of(tmp_path, f"[a]\nruntime=1\nsize=1m\n{line}\n")
    assert said in got and "my.fio line 4" in got and "Fix:" in got


def test_a_users_own_disk_is_replaced_by_each_participants_target_and_said(tmp_path):
    j = job(tmp_path, "[global]\nfilename=/dev/sda\n[a]\nruntime=1\ndirectory=/mnt\nrw=read\n")
    parse_only(j)
    assert "/dev/sda" not in j.render(0) and "/mnt" not in j.render(0)
    assert j.meta()["job_file_target_replaced"] == ["line 2: filename=/dev/sda", "line 5: directory=/mnt"]
    assert fio_jobfile.refusal(lambda: j) is None


def test_a_hex_count_of_clones_is_read_as_fio_reads_it(tmp_path):
    said = refusal_of(tmp_path, "[a]\nruntime=1\nnumjobs=0x8\noffset_increment=9m\nsize=8m\n")
    assert f"reaches byte {71 << 20:,}, beyond the participant's slice" in said


@pytest.mark.parametrize("value", ["4k", "4kb", "4K", "4m", "4mb", "4kB", "0x1000", "8192", "1g"])
def test_a_size_vtb_takes_is_the_size_fio_reads(tmp_path, value):
    """fio's own reading: its null engine does `size` bytes of I/O and says how many."""
    import json
    import subprocess
    opt = fio_jobfile.Option("size", value, 1)
    text = f"[j]\nioengine=null\nfilename=/dev/null\nrw=read\nbs=512\nsize={value}\n"
    out = subprocess.run(["fio", "--output-format=json", "-"], input=text, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["jobs"][0]["read"]["io_bytes"] == fio_jobfile._bytes(opt, SLICE, "f")


@pytest.mark.parametrize("value", ["4KiB", "1.5m", "4 k", "0x1k", "(4*1024)"])
def test_a_size_fio_reads_otherwise_is_refused(tmp_path, value):
    with pytest.raises(JobFileError, match="vtb reads it as bytes"):
        fio_jobfile._bytes(fio_jobfile.Option("size", value, 1), SLICE, "f")


# A property of the gate, against fio's own reading: for every file vtb accepts, fio resolves from
# the rendered file only options on the allowlist (or vtb's own target), every range it resolves
# stays inside the slice, and the job that runs resolves to the same options. Variants come from
# refused options and their aliases.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from harness.workloads import fio_options  # noqa: E402

REFUSED_LINES = ["exec_prerun=touch /tmp/vtb-x", "exec_postrun=id", "filename_format=/tmp/x", "opendir=/etc",
                 "mem=mmap:/tmp/vtb-x", "iomem=mmap:/tmp/vtb-x", "cgroup=../../x", "buffer_pattern='/etc/passwd'",
                 "verify_state_load=1", "ioengine=exec", "ioengine=external:/tmp/x.so", "fileoffset=1g",
                 "filesize=1g", "write_iolog=/tmp/x", "write_lat_log=/tmp/x", "read_iolog=/tmp/x", "fill_device=1",
                 "numjobs=0x10", "offset_increment=0x800000", "size=0x2000000", "offset=3m", "uid=1000",
                 "lockmem=1g", "profile=tiobench", "verify_dump=1", "include /etc/shadow", "ioscheduler=none",
                 "rw=randrw", "bs=4k", "iodepth=0x4", "unlink=1", "kb_base=1000", "zonemode=strided",
                 # fio prints a deprecated option's warning into the line of options it read
                 "verifysort=1", "verifysort_nr=1", "flow_watermark=1",
                 # a header fio opens where vtb saw an option; a line fio reads in two
                 "[zz", "[globalx", "[a]b]", "[ab;c]", "[x#]", "description=" + "x" * 8179 + "include /etc/shadow",
                 "mem=mmap\x00:/tmp/vtb-x", "bs=4k\r"]


@st.composite
def variant(draw) -> str:
    line = draw(st.sampled_from(REFUSED_LINES))
    key, eq, value = line.partition("=")
    how = draw(st.sampled_from(["as is", "upper", "title", "dollar", "pad", "tab", "hex", "control"]))
    if how == "upper":
        key = key.upper()
    elif how == "title":
        key = key.title()
    elif how == "dollar":
        cut = draw(st.integers(0, len(key)))
        key = key[:cut] + draw(st.sampled_from(["${X}", "$X", "${ncpus}", "$mb_memory"])) + key[cut:]
    elif how == "pad":
        key = f"  {key} "
    elif how == "tab":
        key = f"\t{key}\t"
    elif how == "hex" and value.isdigit():
        value = hex(int(value))
    elif how == "control":
        cut = draw(st.integers(0, len(value)))
        value = value[:cut] + chr(draw(st.sampled_from([0, 1, 8, 11, 12, 13, 27, 127]))) + value[cut:]
    return f"{key}{eq}{value}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(variant(), min_size=1, max_size=4), in_global=st.booleans())
def test_every_file_vtb_accepts_resolves_in_fio_to_allowed_options_inside_the_slice(tmp_path, lines, in_global):
    body = "\n".join(lines)
    text = f"[global]\n{body}\n[a]\nruntime=1\n" if in_global else f"[a]\nruntime=1\n{body}\n"
    try:
        j = job(tmp_path, text)
        parse_only(j)
    except JobFileError:
        return
    assert _resolved(j.runnable(0)) == _resolved(j.render(0)), text   # what runs is what was judged
    rendered = j.render(0).replace("${FIO_FILENAME}", "/vtb-target").replace("${FIO_RANDSEED}", "1")
    import os
    import subprocess
    shown = subprocess.run(["fio", "--showcmd", "-"], input=rendered, capture_output=True, text=True,
                           env={**os.environ, "X": "exec_prerun"}).stdout
    options = fio_options._options(next(l for l in shown.splitlines() if l.startswith("fio "))[3:])
    for o in options:
        assert o.key in fio_options.ALLOWED or (o.key, o.value) == ("filename", "/vtb-target"), (text, o)
        assert fio_options.refused(o) is None or o.key == "filename", (text, o)
    jobs = {o.job for o in options if o.job}
    for name in jobs:
        mine = {o.key: o.value for o in options if o.job in (None, name)}   # the job's own come later, and win
        clones = fio_jobfile._count(fio_jobfile.Option("numjobs", mine.get("numjobs", "1"), 0), "f")
        step = fio_jobfile._bytes(fio_jobfile.Option("o", mine.get("offset_increment", "0"), 0), SLICE, "f")
        assert int(mine["offset"]) + step * (clones - 1) + int(mine["size"]) <= SLICE, (text, mine)


def test_a_section_fio_reads_as_global_is_refused(tmp_path):
    """fio takes any section whose name starts with `global` as [global]: its numjobs would reach
    the jobs after it, whose range vtb computed without them."""
    with pytest.raises(JobFileError, match=r"my.fio line 3: \[global2\]: fio reads a section whose name starts"):
        job(tmp_path, "[j1]\nruntime=5\n[global2]\nnumjobs=4\noffset_increment=64m\nsize=4k\n[j2]\nruntime=5\n")


def test_what_runs_is_the_text_that_was_checked(tmp_path):
    """A file changed on disk after it was checked is not read again: the JobFile renders its own."""
    j = job(tmp_path, "[a]\nruntime=1\nrw=read\n")
    (tmp_path / "my.fio").write_text("[a]\nruntime=1\nrw=read\ncgroup=../../x\n")
    assert "cgroup" not in j.render(0)
    with pytest.raises(JobFileError, match="cgroup"):
        job(tmp_path, (tmp_path / "my.fio").read_text())


# --- the file read whole, as fio and the runner's shell both read it ---------------------------------
def test_a_deprecated_option_cannot_hide_the_options_fio_read(tmp_path):
    """fio prints a deprecated option's warning after `fio ` on its --showcmd line, and the options
    on the next line: nothing of that output may go unjudged."""
    said = refusal_of(tmp_path, '[global]\nverifysort=1\nmem=mmapshared:/tmp/vtb-x\nbuffer_pattern="x"\n[a]\nruntime=1\n')
    assert "fio said more than the options it read" in said and "deprecated" in said


@pytest.mark.parametrize("char", ["\x00", "\x01", "\r", "\x1b", "\x7f", "\x0b", "\x0c"])
def test_a_control_character_is_refused_naming_its_line(tmp_path, char):
    """The check's fio stops at a NUL that the runner's `job=$(cat)` drops: `mem=mmap<NUL>:/path`
    would be judged as `mem=mmap` and run as `mem=mmap:/path`."""
    with pytest.raises(JobFileError, match=r"my.fio line 3: a control character \(0x[0-9a-f]{2}\)"):
        job(tmp_path, f"[a]\nruntime=1\nmem=mmap{char}:/tmp/vtb-x\n")


@pytest.mark.parametrize("header", ["[zz", "[globalx", "[a]b]", "[a] x", " [b", "[ab;c]", "[ab#]", "[global1;"])
def test_a_header_fio_would_open_where_vtb_sees_an_option_is_refused(tmp_path, header):
    """`[zz` is a section to fio: the numjobs after it would not be the one vtb computed [a]'s range from."""
    text = f"[a]\nruntime=1\nnumjobs=8\noffset_increment=1g\n{header}\nnumjobs=1\n"
    with pytest.raises(JobFileError, match=r"my.fio line 5: .*fio starts a new section at any line that begins with"):
        job(tmp_path, text)


def test_a_line_fio_would_read_in_two_is_refused_before_anything_is_included(tmp_path):
    said = refusal_of(tmp_path, "[a]\nruntime=1\ndescription=" + "x" * 8179 + "include /etc/shadow\n")
    assert "my.fio line 3: 8210 bytes" in said and "root:" not in said


def test_a_long_description_under_the_limit_is_taken(tmp_path):
    parse_only(job(tmp_path, "[a]\nruntime=1\ndescription=" + "x" * 4000 + "\n"))


def test_fio_on_a_host_writes_its_verify_state_in_a_folder_of_its_own(tmp_path, monkeypatch):
    """fio saves a verify state as `local-<job>-<n>-verify.state` in its working directory, following
    a symlink of that name: in the folder vtb was started in (a pull request's checkout, in CI), root's
    fio would overwrite the link's target. It runs in a private, empty folder instead."""
    from harness.hosts import LocalHost
    from harness.workloads import fio
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "local-a-0-verify.state").symlink_to(victim)
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (8 << 20))
    j = job(tmp_path, "[a]\nruntime=1\nrw=write\nbs=4k\nsize=1m\nverify=crc32c\n")
    (out,) = fio.on_host(LocalHost(), j, device=str(data), slots=[(0, 8 << 20)])
    assert fio.parse_jobs(out.raw).facets()
    assert victim.read_bytes() == b"untouched"   # before: fio's verify state, binary
    # its folder went with it (other runs' may be there now: this job's verify state is in none)
    assert not list(Path("/tmp").glob("vtb-fio-*/local-a-0-verify.state"))


# --- what a participant may take of its host (the refusals are above) -----------------------------
@pytest.mark.parametrize("line", ["nice=10", "prioclass=3", "prio=4", "numjobs=4", "iodepth=256", "thinktime=500",
                                  "thinktime=20ms"])
def test_what_fits_a_participant_is_taken(tmp_path, line):
    parse_only(job(tmp_path, f"[a]\nruntime=1\nsize=1m\n{line}\n"))


@pytest.mark.parametrize("value", ["1²", "١٢", "８"])
def test_digits_fio_does_not_read_as_digits_are_refused_not_a_traceback(tmp_path, value):
    """Python's isdigit() and int() take `1²` and other scripts' digits; fio does not."""
    with pytest.raises(JobFileError, match="vtb reads a count as a whole number"):
        job(tmp_path, f"[a]\nruntime=1\nnumjobs={value}\n")
    with pytest.raises(JobFileError, match="vtb reads it as bytes"):
        fio_jobfile._bytes(fio_jobfile.Option("size", value, 1), SLICE, "f")


def test_runtimes_alias_is_refused_since_the_bound_reads_runtime(tmp_path):
    with pytest.raises(JobFileError, match=r"my.fio line 3: `timeout`: fio reads it as runtime"):
        job(tmp_path, "[a]\nruntime=1\ntimeout=99999\n")


@pytest.mark.parametrize("value", ["vtb-fill", "vtb-ss.a", "other"])
def test_a_name_other_than_the_sections_is_refused(tmp_path, value):
    """`name=vtb-fill` would be read as vtb's precondition fill in the results."""
    with pytest.raises(JobFileError, match=r"my.fio line 3: `name`: a job is named by its \[section\] header"):
        job(tmp_path, f"[a]\nruntime=1\nname={value}\n")


def test_clones_are_bounded_over_the_whole_file_not_per_job(tmp_path):
    text = "[global]\nruntime=1\nsize=64k\nnumjobs=40\n[a]\n[b]\n"
    assert "80 fio processes in all" in refusal_of(tmp_path, text)
    parse_only(job(tmp_path, "[global]\nruntime=1\nsize=64k\nnumjobs=30\n[a]\n[b]\nnumjobs=34\n"))


@pytest.mark.parametrize("line", ["cmdprio_class=1", "cmdprio_percentage=100", "cmdprio_bssplit=4k/100/1"])
def test_a_priority_per_command_is_refused(tmp_path, line):
    assert "vtb runs only options that shape the I/O" in refusal_of(tmp_path, f"[a]\nruntime=1\nioengine=libaio\n{line}\n")


def test_two_jobs_of_one_name_are_two_jobs_clones_counted(tmp_path):
    assert "66 fio processes in all" in refusal_of(tmp_path, "[global]\nruntime=1\nsize=64k\nnumjobs=33\n[a]\n[a]\n")


def test_a_precondition_does_not_count_as_clones_of_the_users_jobs(tmp_path):
    pre = fio_jobfile.Precondition(window_s=1, ramp_s=0, max_s=3)
    parse_only(job(tmp_path, "[global]\nruntime=1\nsize=64k\nnumjobs=60\n[a]\n", precondition=pre))


def _resolved(text: str) -> list:
    for placeholder, stands_for in fio_jobfile._PLACEHOLDERS.items():
        text = text.replace(placeholder, stands_for)
    return [o for o in fio_options.resolve(text) if o.key != "description"]


@pytest.mark.parametrize("capture, precondition", [(False, None), (True, None),
                                                   (False, fio_jobfile.Precondition(window_s=10, ramp_s=2, max_s=60))])
def test_what_runs_is_written_from_fios_own_resolution_and_reads_back_the_same(tmp_path, capture, precondition):
    """The job that runs is fio's resolution of the checked rendering, written back: fio reads it
    as it read what was judged (the placeholders named again for the runner), option for option."""
    text = ("[global]\ndescription=a b \"c\"\nioengine=libaio\ndirect=1\nruntime=5\nbs=4k\nbuffer_pattern=\"ab\"\n"
            "random_distribution=zipf:1.2\nbssplit=4k/50:64k/50\nrandseed=7270627\n"
            "[one]\nrw=randread\niodepth=8\nsize=1m\n[two]\nstonewall\nrw=write\noffset_increment=2m\n"
            f"size=1m\n{'' if capture else 'numjobs=2'}\n")
    j = job(tmp_path, text, capture=capture, precondition=precondition)
    runs = j.runnable(4096)
    assert "description" not in runs and "${FIO_FILENAME}" in runs and "randseed=7270627" in runs
    assert ("${FIO_IOLOG}.one" in runs) == capture
    assert _resolved(runs) == _resolved(j.render(4096))
