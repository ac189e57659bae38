"""The building blocks of every settings model: the strict base section, the config error, and the
field types that core settings and plugins share. Imports nothing else from the harness, so a
plugin can declare its settings without pulling the rest in."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

FIX = "fix"  # key in a field's json_schema_extra: how to repair a bad value


class ConfigError(Exception):
    """A bad config: the message names the field and the fix. Raised before anything is provisioned."""


class Refusal(ConfigError):
    """What the config asks of a host that vtb refuses there (a device not allowlisted, in use or
    too small): bad input, found on the host; nothing was changed."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StudySection(Section):
    """A study's settings: its defaults answer the study's headline question in a default run;
    `full` sweeps the study's whole matrix (FULL) in every field the config does not set itself."""
    FULL: ClassVar[dict[str, Any]] = {}
    full: bool = Field(False, description="sweep the study's whole matrix (a long run: `--plan` says how long) "
                                          "in every field not set here")

    @model_validator(mode="before")
    @classmethod
    def _full_matrix(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("full") in (True, "true", "True", 1):
            return {**cls.FULL, **data}
        return data


def each(ok, message: str) -> AfterValidator:
    """A list whose every element must pass `ok`; the message names the rule."""
    def check(values: list) -> list:
        if not all(ok(v) for v in values):
            raise ValueError(message)
        return values
    return AfterValidator(check)


def _power_of_two(kib: int) -> int:
    if kib & (kib - 1):
        raise ValueError("a chunk size must be a power of two KiB")
    return kib


BlockSize = Annotated[str, Field(pattern=r"^[1-9][0-9]*[kKmM]?$")]


def bs_bytes(bs: str) -> int:
    """A block size as fio writes it (4k, 1m, 512) in bytes."""
    m = re.fullmatch(r"(\d+)([kKmM]?)", str(bs))
    if not m:
        raise ValueError(f"block size {bs!r}")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1 << 20}[m.group(2).lower()]


def _state_path(path: Path) -> Path:
    if not path.is_absolute() or not re.fullmatch(r"[A-Za-z0-9._/@+= -]+", str(path)):
        raise ValueError("must be an absolute path of letters, digits, spaces and ._/@+=- "
                         "(it reaches shell commands, Terraform and libvirt XML on every host)")
    return path


# A folder vtb makes and keeps state in: absolute, and no character a shell or XML reads as syntax.
StatePath = Annotated[Path, AfterValidator(_state_path)]


KERNEL_FILESYSTEMS = ("/proc", "/sys", "/dev")   # the kernel's views: no folder of files is made there


def _folder_path(path: Path) -> Path:
    """A folder vtb writes files into: one that is not a file, nor inside the kernel's views."""
    resolved = path.expanduser().resolve()
    if any(resolved == Path(k) or Path(k) in resolved.parents for k in KERNEL_FILESYSTEMS):
        raise ValueError(f"it is inside {', '.join(KERNEL_FILESYSTEMS)}, where vtb writes no files: give a folder "
                         "of your own")
    if resolved.exists() and not resolved.is_dir():
        raise ValueError("it is not a folder: give a folder (one that does not exist yet is made)")
    return path


# A folder vtb writes files into (results): made when missing.
FolderPath = Annotated[Path, AfterValidator(_folder_path)]


PositiveInts = Annotated[list[int], each(lambda n: n >= 1, "every value must be >= 1")]
VmCounts = Annotated[list[int], each(lambda n: n >= 1, "every VM count must be >= 1")]
RaidLevel = Literal[0, 1, 5, 6, 10]
ChunkKib = Annotated[int, Field(ge=4, le=65536), AfterValidator(_power_of_two)]
Filesystem = Literal["ext4", "xfs", "btrfs", "f2fs", "nilfs2"]
