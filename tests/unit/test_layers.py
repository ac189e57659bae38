"""The code keeps to its layers: pyproject.toml's import-linter contract (make lint checks it), and
no import cycle among modules, lazy imports included."""
import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                out.append(sorted([v, *group]))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_no_module_imports_itself_through_others():
    assert _cycles(grimp.build_graph("harness")) == []


def test_a_cycle_is_found():
    graph = grimp.ImportGraph()
    for a, b in (("x.a", "x.b"), ("x.b", "x.c"), ("x.c", "x.a"), ("x.c", "x.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["x.a", "x.b", "x.c"]]



def _takes_the_config(root, packages: tuple[str, ...]) -> list[str]:
    """Functions in `packages` under `root` with a parameter that is the whole config (named cfg or
    config, or annotated Config)."""
    import ast
    found = []
    for path in sorted(f for p in packages for f in (root / p).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                annotation = ast.unparse(a.annotation).strip("'\"") if a.annotation else ""
                if a.arg in ("cfg", "config") or annotation.rpartition(".")[2] == "Config":
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}({a.arg})")
    return found


def test_the_layers_below_the_config_take_their_own_settings_never_the_whole_config():
    """A backend, a host or a resource reads its own typed settings (`Config.placement`,
    `.nested_place`, `.ceph_fleet`, [raid], a backend's [disk] fields): what it depends on is in its
    signature, and a change to another section cannot reach it."""
    from pathlib import Path

    import harness
    assert _takes_the_config(Path(harness.__file__).parent, ("backends", "hosts", "resources")) == []


def test_a_function_that_takes_the_whole_config_is_found(tmp_path):
    (tmp_path / "resources" / "ceph").mkdir(parents=True)
    (tmp_path / "resources" / "ceph" / "plan.py").write_text(
        "def a(cfg): ...\ndef b(x: 'Config'): ...\nclass C:\n    def c(self, *, s: core.Config): ...\ndef d(ceph): ...\n")
    assert _takes_the_config(tmp_path, ("resources",)) == [
        "resources/ceph/plan.py:1 a(cfg)", "resources/ceph/plan.py:2 b(x)", "resources/ceph/plan.py:4 c(s)"]
