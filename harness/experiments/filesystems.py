"""`harness run filesystems`: fio on a file in ext4/xfs/btrfs/f2fs/nilfs2, on RAID 0 and RAID 5 against a
single device, buffered and direct, PE and VE.
Config section [filesystems]; member devices from [raid]. Each point makes its filesystem afresh (the
VM on its own disk, which sits on the array); a filesystem the host cannot make is skipped with the
reason. The summary adds the study's headline: F2FS against EXT4 for buffered random writes."""
from typing import Literal

from pydantic import Field, model_validator

from harness.analysis.stats import difference, holm, p_text
from harness.common.console import console
from harness.common.files import write_atomic
from harness.common.schema import Filesystem, RaidLevel
from harness.config.core import Config
from harness.experiments import RunContext
from harness.experiments.raid_sweep import SINGLE, RaidSweep, RaidSweepSettings, Setup, raid_flags, raid_rows
from harness.report import tables
from harness.resources.raid import mkfs_size_problem

ALPHA = 0.05
STUDY = {0: "about 5x", 5: "about 50x"}   # F2FS over EXT4, buffered random writes, 8 SSDs (study 002)


class Settings(RaidSweepSettings):
    FULL = {"filesystems": ["ext4", "xfs", "btrfs", "f2fs", "nilfs2"],
            "patterns": ["read", "write", "randread", "randwrite"], "direct": [True, False]}
    filesystems: list[Filesystem] = Field(["ext4", "f2fs"], min_length=1,
                                          description="filesystems to compare (the headline: F2FS against EXT4; full: "
                                                      "ext4, xfs, btrfs, f2fs, nilfs2)")
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["randwrite"], min_length=1, description="fio access patterns (full: all four)")
    direct: list[bool] = Field([False], min_length=1, description="direct (O_DIRECT) and/or buffered I/O "
                                                                  "(the headline: buffered; full: both)")
    levels: list[RaidLevel] = Field([0, 5], min_length=1, description="RAID levels of the arrays (each compared "
                                                                       "with a single device)")
    members: int = Field(4, ge=3, le=64, description="member devices of each array")
    size_mib: int = Field(300, ge=16, description="the region each filesystem is made on (host and VM alike); "
                                                  "xfs needs 300 MiB")

    @model_validator(mode="after")
    def _every_filesystem_fits(self) -> "Settings":
        """Rejected before anything is provisioned: mkfs would refuse the region mid-run."""
        for fs in self.filesystems:
            if why := mkfs_size_problem(fs, self.size_mib, "filesystems.size_mib"):
                raise ValueError(f"{why}, or remove {fs} from filesystems")
        return self


class Filesystems(RaidSweep):
    question = "Which filesystem on RAID, PE and VE"
    name = "filesystems"
    section = "filesystems"
    Settings = Settings
    flags = raid_flags("filesystems")

    def setups(self, cfg: Config) -> list[Setup]:
        c = cfg.filesystems
        return [Setup(None, 1, 0)] + [Setup(level, c.members, cfg.raid.chunk_kib) for level in c.levels]

    def filesystems(self, cfg: Config) -> list[str | None]:
        return list(cfg.filesystems.filesystems)

    def summarize(self, ctx: RunContext) -> None:
        super().summarize(ctx)
        lines = f2fs_over_ext4(raid_rows(ctx.store.samples))
        if lines:
            title = "F2FS against EXT4, buffered random writes (bandwidth ratio, mean over repeats):"
            text = "\n".join([title, *lines])
            console.print(text)
            tables.record_text(title, lines, verdict=True)
            summary = ctx.store.dir / "summary.txt"
            write_atomic(summary, (summary.read_text() if summary.exists() else "") + "\n" + text + "\n")


def f2fs_over_ext4(rows: list[dict], point: str = "randwrite-buffered") -> list[str]:
    """One line per setup and environment that has both: the ratio, whether the difference is
    significant (Welch's t-test on log values, Holm-adjusted over the lines), and what the study
    saw on the same level."""
    by = {(r["setup"], r["point"]): r for r in rows}
    found = []
    for setup in dict.fromkeys(r["setup"] for r in rows):
        f2fs, ext4 = by.get((setup, f"f2fs-{point}")), by.get((setup, f"ext4-{point}"))
        if not f2fs or not ext4:
            continue
        for env, label in (("physical", "PE"), ("virtual", "VE")):
            a, b = f2fs.get(f"{env}_bw"), ext4.get(f"{env}_bw")
            if a and b:
                diff = difference(ext4.get(f"{env}_bw{tables.VALUES}", [b]), f2fs.get(f"{env}_bw{tables.VALUES}", [a]))
                found.append((setup, label, a / b, diff))
    lines = []
    for (setup, label, ratio, diff), p in zip(found, holm([d.p_value if d else None for *_, d in found])):
        level = None if setup == SINGLE else int(setup.split("-")[0].removeprefix("raid"))
        verdict = ("no test: one repeat, or no spread" if p is None else
                   f"significant, {diff.percent()}, {p_text(p)}" if p < ALPHA else
                   f"not significant, p={p:.2f}: no difference larger than {diff.bound:.0%} at this noise")
        study = f"; the study: {STUDY[level]}" if level in STUDY else ""
        lines.append(f"  {setup:<18} {label}: {ratio:5.2f}x ({verdict}){study}")
    return lines


EXPERIMENT = Filesystems()
