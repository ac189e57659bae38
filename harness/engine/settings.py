"""The whole configuration: the core sections (harness/config/core.py) plus one section per experiment,
each declared by the experiment itself (its Settings), assembled from the registry. Loads it from
TOML and typed overrides; every error names the field and the fix."""
from __future__ import annotations

import json
import os
import tomllib
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError, create_model

from harness.common.schema import FIX, ConfigError
from harness.config.core import Config, validation_context

__all__ = ["ConfigError", "describe", "field_at", "load", "model", "parse_override", "typed_value"]


@cache
def model() -> type[Config]:
    """Config with a section for every experiment in the registry."""
    from harness.experiments import registry
    sections = {}
    for exp in registry().values():
        if exp.section in Config.model_fields or sections.get(exp.section, (exp.Settings,))[0] is not exp.Settings:
            raise TypeError(f"experiment {exp.name}: section [{exp.section}] is already taken")
        sections[exp.section] = (exp.Settings, exp.Settings())
    return create_model("Config", __base__=Config, __module__=__name__, **sections)


def field_at(keys: list[str] | tuple[str, ...]) -> Any:
    """The pydantic FieldInfo at a dotted location (None when there is no such field)."""
    current: Any = model()
    info = None
    for part in keys:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        info = fields[part]
        current = info.annotation
        if typing.get_origin(current) is list:   # [[hosts]]: the fields of its entries
            current = typing.get_args(current)[0]
    return info


def describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if isinstance(p, str))
        field = ".".join(loc) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            lines.append(f"{field}: unknown key. Fix: remove it or check its spelling (docs/config-reference.md "
                         "lists every field)")
            continue
        info = field_at(loc)
        fix = ""
        if info is not None:
            extra = info.json_schema_extra or {}
            fix = extra.get(FIX) or f"set {field} ({info.description})" if info.description else ""
        got = f" (got {e['input']!r})" if not isinstance(e.get("input"), dict) else ""
        head = "" if msg.startswith(f"{field}.") else f"{field}: "  # the message already names a sub-field
        lines.append(f"{head}{msg}{got}." + (f" Fix: {fix}." if fix else ""))
    if len(lines) == 1:
        return f"invalid configuration: {lines[0]}"
    return f"invalid configuration, {len(lines)} problems:\n  " + "\n  ".join(lines)


def _takes_text(annotation: Any) -> bool:
    """Whether a field holds text as given (str, Path, a Literal of strings), so '123' stays '123'."""
    if annotation in (str, Path):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return any(_takes_text(a) for a in typing.get_args(annotation) if a is not type(None))
    return False


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _toml_array(raw: str) -> list | None:
    """A TOML array as the config file would hold it (['read'] too: TOML's literal strings), or None."""
    try:
        value = tomllib.loads(f"v = {raw}")["v"] if raw.strip().startswith("[") else None
    except tomllib.TOMLDecodeError:
        return None
    return value if isinstance(value, list) else None


def typed_value(keys: list[str], raw: str) -> Any:
    """A command-line value for the field at `keys`, typed by that field: text fields keep the text,
    lists take JSON, a TOML array or comma-separated items (brackets optional), the rest is read as JSON."""
    info = field_at(keys)
    annotation = info.annotation if info is not None else None
    if typing.get_origin(annotation) is list:
        if isinstance(parsed := _json_or_text(raw), list) or isinstance(parsed := _toml_array(raw), list):
            return parsed
        (item,) = typing.get_args(annotation) or (Any,)
        items = [i.strip() for i in raw.strip().removeprefix("[").removesuffix("]").split(",") if i.strip()]
        return [i if _takes_text(item) else _json_or_text(i) for i in items]
    if annotation is not None and _takes_text(annotation):
        return raw
    return _json_or_text(raw)


def parse_override(item: str) -> tuple[list[str], Any]:
    """'a.b=value' -> (['a', 'b'], the value typed by the field a.b)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set fleet.vms=2")
    key, raw = item.split("=", 1)
    keys = key.strip().split(".")
    return keys, typed_value(keys, raw)


def merge(data: dict, keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        node = data.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {'.'.join(keys)}: {k} is not a section")
        data = node
    data[keys[-1]] = value


def load_resumed(recorded: dict, results_dir: Path, overrides: list[str] = (),
                 typed: list[tuple[list[str], Any]] = ()) -> Config:
    """A resumed run's config: the one it began with (its run.json), with what the command line
    states (--set, flags) on top, and the results folder it is found in now (a run folder may move).
    The config file is not read again: it may have changed since. The record holds every field;
    those at their defaults are left out, so that each is checked as the user set it (a backend's
    own fields only with that backend)."""
    defaults = json.loads(model().model_validate({}, context=validation_context({})).model_dump_json())
    data = _set_apart_from(json.loads(json.dumps(recorded)), defaults)
    for item in overrides:
        merge(data, *parse_override(item))
    for keys, value in typed:
        merge(data, list(keys), value)
    data["results_dir"] = str(results_dir)
    try:
        return model().model_validate(data, context=validation_context(data))
    except ValidationError as e:
        raise ConfigError(f"the resumed run's own config (its run.json) with what the command line sets is not "
                          f"valid for this vtb: {describe(e)}") from None


def _set_apart_from(data: dict, defaults: dict) -> dict:
    """`data` without the fields that hold their default (sections by their fields)."""
    out = {}
    for key, value in data.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict):
            if sub := _set_apart_from(value, default):
                out[key] = sub
        elif key not in defaults or value != default:
            out[key] = value
    return out


def load(path: Path | None = None, overrides: list[str] = (),
         typed: list[tuple[list[str], Any]] = ()) -> Config:
    """Config file (TOML; default ./harness.toml if present), then KEY=VALUE overrides, then
    already typed (keys, value) overrides (a command's flags)."""
    data: dict = {}
    if path is None and Path("harness.toml").exists():
        path = Path("harness.toml")
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist. Fix: pass an existing file to --config") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}. Fix: correct it there (`harness config "
                              "reference --sections` sketches every section and its keys)") from None
        except (OSError, UnicodeDecodeError) as e:   # a directory, no read permission, not text
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(f"config file {path} cannot be read: {reason}. Fix: pass a readable TOML file "
                              "to --config") from None
    for item in overrides:
        merge(data, *parse_override(item))
    for keys, value in typed:
        merge(data, list(keys), value)
    if "VTB_STATE_DIR" in os.environ:
        data.setdefault("state_dir", os.environ["VTB_STATE_DIR"])
    try:
        return model().model_validate(data, context=validation_context(data))
    except ValidationError as e:
        raise ConfigError(describe(e)) from None
