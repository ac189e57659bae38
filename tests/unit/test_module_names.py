"""pytest imports test modules by their file name (the tests folders are not packages): two files
of one name anywhere under tests/ stop the whole collection, so every name is unique."""
from collections import Counter
from pathlib import Path


def test_every_test_module_name_is_unique():
    names = Counter(p.name for p in (Path(__file__).parents[1]).rglob("test_*.py"))
    assert [n for n, k in names.items() if k > 1] == []
