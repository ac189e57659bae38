"""Plug-in discovery: every module in a package that defines the named attribute contributes it."""
from __future__ import annotations

import importlib
import pkgutil


def discover(package: str, path: list[str], attribute: str, key: str = "name") -> dict:
    """{plugin.<key>: plugin} for the modules of `package` that define `attribute`, sorted by that key."""
    found = {}
    for mod in pkgutil.iter_modules(path):
        if mod.name == "__main__":   # the package's entry point, not a plug-in
            continue
        plugin = getattr(importlib.import_module(f"{package}.{mod.name}"), attribute, None)
        if plugin is not None:
            found[getattr(plugin, key)] = plugin
    return dict(sorted(found.items()))


def declared(package: str, path: list[str], attribute: str) -> list:
    """Every module's `attribute` (a tuple) in the package and its subpackages, joined in the order
    of the modules' names: what many modules each declare a few of."""
    found = []
    for mod in sorted(pkgutil.walk_packages(path, f"{package}."), key=lambda m: m.name):
        if mod.name.endswith(".__main__"):
            continue
        found += getattr(importlib.import_module(mod.name), attribute, ())
    return found
