"""The configuration reference (docs/config-reference.md), generated from the pydantic schema
itself: every section and field with its type, default, range and description, so that it cannot
go stale (a test compares the page with this). `harness config reference` prints it."""
from __future__ import annotations

import typing
from enum import Enum
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from harness.common import paths
from harness.engine.settings import model

HEADER = """# Configuration reference

Generated from the schema (`harness config reference > docs/config-reference.md`); a test fails
when it is out of date. Set any field in a TOML file (`--config FILE`, default `./harness.toml`)
under its section, or on the command line: `--set section.field=value`. A wrong value is refused
before anything runs, naming the field and the fix.
"""


def _model_of(annotation) -> type[BaseModel] | None:
    """The settings model a field holds (directly, optionally, or as a list of them)."""
    for t in (annotation, *typing.get_args(annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _type(annotation) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is typing.Annotated:
        return _type(args[0])
    if args:
        inner = ", ".join(_type(a) for a in args if a is not type(None))
        name = getattr(origin, "__name__", str(origin))
        return f"{inner} or unset" if type(None) in args and name in ("Union", "UnionType") else f"{name}[{inner}]"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    return getattr(annotation, "__name__", str(annotation)).replace("PosixPath", "path").replace("Path", "path")


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):   # the checkout's own folders, wherever it is
        return f"`{value}`" if not value.is_relative_to(paths.REPO) else f"`<checkout>/{value.relative_to(paths.REPO)}`"
    return f"`{value!r}`"


def _range(info: FieldInfo) -> str:
    said = []
    for m in info.metadata:
        for kind, attr, sign in ((Ge, "ge", ">="), (Gt, "gt", ">"), (Le, "le", "<="), (Lt, "lt", "<")):
            if isinstance(m, kind):
                said.append(f"{sign} {getattr(m, attr)}")
        if isinstance(m, MinLen):
            said.append(f"at least {m.min_length} item(s)")
        if isinstance(m, MaxLen):
            said.append(f"at most {m.max_length}")
        if getattr(m, "pattern", None):
            said.append(f"matches `{m.pattern}`")
    return ", ".join(said)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _section(name: str, settings: type[BaseModel], out: list[str]) -> None:
    nested = []
    rows = []
    for field, info in settings.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is not None:
            nested.append((f"{name}.{field}" if name else field, inner, info))
            continue
        rows.append(f"| `{field}` | {_type(info.annotation)} | {_default(info)} | {_cell(_range(info))} | "
                    f"{_cell(info.description or '')} |")
    if rows:
        out += [f"\n## [{name}]\n" if name else "\n## top level\n", "| field | type | default | range | what it is |",
                "|---|---|---|---|---|", *rows]
    for sub, inner, info in nested:
        many = typing.get_origin(info.annotation) is list
        _section(f"[{sub}]" if many else sub, inner, out)
        if info.description and out and out[-1] != "":
            out.append(f"\n{_cell(info.description)}")


def markdown() -> str:
    out = [HEADER]
    _section("", model(), out)
    return "\n".join(out).rstrip() + "\n"


def _sketch(name: str, settings: type[BaseModel], out: list[str], many: bool = False) -> None:
    fields, nested = [], []
    for field, info in settings.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is not None:
            nested.append((f"{name}.{field}" if name else field, inner, typing.get_origin(info.annotation) is list))
        else:
            fields.append(field)
    if name and fields:
        head = f"{f'[[{name}]]' if many else f'[{name}]':<20} # "
        line = head
        for i, field in enumerate(fields):
            word = field + ("," if i < len(fields) - 1 else "")
            if len(line) + len(word) > 110 and line != head:
                out.append(line.rstrip())
                line = " " * 20 + " #   "
            line += word + " "
        out.append(line.rstrip())
    for sub, inner, sub_many in nested:
        _sketch(sub, inner, out, sub_many)


def sections() -> str:
    """Every section with its fields' names, as a TOML sketch (docs/configuration.md's, between its markers)."""
    out = ["```toml", "# the top level: " + ", ".join(f for f, i in model().model_fields.items()
                                                      if _model_of(i.annotation) is None)]
    _sketch("", model(), out)
    return "\n".join([*out, "```"]) + "\n"
