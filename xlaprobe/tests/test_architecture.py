"""The package's shape: no import cycle (function-local imports count), no function over 80 lines,
every function-local import says why it is not at module level.

The import graph is read from the source with `ast`, so an import inside a function is an edge like
any other: a cycle hidden by a deferred import fails here. Importing ``pkg.mod`` from ``pkg`` is an
edge to ``pkg.mod`` only (Python runs ``pkg/__init__`` first for every submodule anyway).
"""

import ast
import io
import pathlib
import tokenize

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "xlaprobe"
MAX_LINES = 80


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
    if len(subs) == len(node.names):
        return subs
    return subs + ([target] if target in known else [])


def import_graph() -> dict[str, set[str]]:
    """Module -> the xlaprobe modules it imports anywhere in its source."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            graph[name].update(t for t in _imported(node, name, path.name == "__init__.py",
                                                    set(modules)) if t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    graph = import_graph()
    assert "xlaprobe.checking" in graph and "xlaprobe.oracle" in graph["xlaprobe.checking"]
    assert cycles(graph) == []


def test_no_function_over_80_lines():
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines})")
    assert long == []


@pytest.mark.parametrize("name", ["xlaprobe.search", "xlaprobe.oracle", "xlaprobe.triage"])
def test_leaf_modules_stay_low(name):
    """The algorithms and the oracle sit below the middle layer: they import none of it."""
    graph = import_graph()
    if name not in graph:
        pytest.skip(f"{name} not present")
    middle = {m for m in graph if m.startswith(("xlaprobe.localization", "xlaprobe.campaign",
                                                 "xlaprobe.tune", "xlaprobe.cli"))}
    reach, todo = set(), [name]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    assert not reach & middle


def package_graph(graph: dict[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    """The import graph with each module cut to its first `depth` name parts: at depth 2 each
    subpackage (``xlaprobe.configs``) and top-level module is one node, at depth 3 each
    sub-subpackage (``xlaprobe.a.b``) and module of a subpackage. An edge between two nodes is any
    import from a module of one to a module of the other."""
    def node(module: str) -> str:
        return ".".join(module.split(".")[:depth])
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(node(module), set()).update(
            node(t) for t in targets if node(t) != node(module))
    return packages


def test_no_package_level_cycle():
    """No cycle between subpackages and top-level modules (the library never imports `cli`, the
    artifact format never imports localization, `configs` never imports `releases`), nor between
    the subpackages and modules inside any package, at every depth of nesting."""
    graph = import_graph()
    deepest = max(len(m.split(".")) for m in graph)
    assert deepest >= 2
    for depth in range(2, deepest + 1):
        assert cycles(package_graph(graph, depth)) == [], depth
    assert package_graph({"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()}) == {
        "p.a": {"p.b"}, "p.b": {"p.a"}}
    assert cycles(package_graph({"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()})) == [
        ["p.a", "p.b"]]


def test_the_library_never_imports_the_cli():
    graph = import_graph()
    library = [m for m in graph if not m.startswith(("xlaprobe.cli", "xlaprobe.__main__"))]
    assert [(m, t) for m in library for t in graph[m] if t.startswith("xlaprobe.cli")] == []


def test_primitive_records_sit_below_the_tables():
    """Data flows one way: the records (`xlaprobe.lax_rules`) import nothing else of xlaprobe,
    their leaf modules import no family module, and the four tables read the records."""
    graph = import_graph()
    records = {m for m in graph if m.startswith("xlaprobe.lax_rules")}
    assert {"xlaprobe.lax_rules.record", "xlaprobe.lax_rules.elementwise"} <= records
    assert {(m, t) for m in records for t in graph[m] if t not in records} == set()
    leaves = {"xlaprobe.lax_rules." + n for n in ("facts", "numeric", "opspec", "budget")}
    assert {(m, t) for m in leaves for t in graph[m] if t not in leaves} == set()
    for table in ("xlaprobe.primitives", "xlaprobe.configs.reference", "xlaprobe.sources.ops",
                  "xlaprobe.approximations"):
        assert "xlaprobe.lax_rules.registry" in graph[table], table


def _comment_lines(text: str) -> dict[int, str]:
    """Line number -> the comment on it (directives such as ``noqa`` or ``type:`` say no why)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            words = token.string.lstrip("#").strip()
            if words and not words.startswith(("noqa", "type:", "pragma", "fmt:")):
                found[token.start[0]] = words
    return found


def unexplained_local_imports(text: str) -> list[int]:
    """Lines of the imports inside a function that give no reason: a reason is a comment on the
    import's own lines, or a comment line right above it, which also explains the imports that
    follow it with no other statement between (one comment may explain a block)."""
    comments, lines = _comment_lines(text), text.splitlines()
    bare: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            block = False  # a comment line above explains this run of imports
            for stmt in body:
                if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    block = False
                elif any(n in comments for n in range(stmt.lineno, stmt.end_lineno + 1)):
                    pass
                elif stmt.lineno - 1 in comments and \
                        lines[stmt.lineno - 2].lstrip().startswith("#"):
                    block = True
                elif in_function and not block:
                    bare.append(stmt.lineno)
                visit(stmt, in_function or isinstance(stmt, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef)))

    visit(ast.parse(text), False)
    return bare


def test_reason_finder_on_known_source():
    text = (
        "import os\n"                                  # 1 module level: needs nothing
        "def f():\n"
        "    import jax  # heavy: only f needs it\n"    # 3 its own line
        "    import numpy as np\n"                     # 4 a trailing comment explains one line
        "    # optional: the extra\n"
        "    import optax\n"                           # 6 the line above
        "    from flax import nnx\n"                   # 7 the same block
        "    x = 1\n"
        "    import numpy\n"                           # 9 code between: no reason
        "    if x:\n"
        "        from a import b  # noqa: F401\n"      # 11 a directive is no reason
        "    try:\n"
        "        import ray  # optional\n"             # 13
        "    except ImportError:\n"
        "        import json\n"                        # 15 no reason
        "class C:\n"
        "    def m(self):\n"
        "        x = 2  # a comment on another statement\n"
        "        import re\n"                         # 19 the line above is code
        "def g(k):\n"
        "    match k:\n"
        "        case 1:\n"
        "            import csv\n"                    # 23 inside a case: no reason
        "        case _:\n"
        "            import abc  # light, but only g needs it\n")  # 25
    assert unexplained_local_imports(text) == [4, 9, 11, 15, 19, 23]


def test_every_function_local_import_says_why():
    """An import inside a function is heavy (jax, matplotlib, lightgbm kept out of `xlaprobe
    --help` and light modules), optional (an extra), breaks a cycle, or runs where it must (a
    worker, another release's interpreter): the comment says which. Anything else belongs at the
    top of the module."""
    bare = [f"{path.relative_to(SRC)}:{line}" for path in sorted(SRC.rglob("*.py"))
            for line in unexplained_local_imports(path.read_text())]
    assert bare == []
