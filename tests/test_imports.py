"""Every module of the package imports on its own, and no module imports itself round a circle.

1. Each module of the installed package (shrinkbert.* walked with pkgutil) is imported in a process
   of its own that has imported no other shrinkbert module first: a module that works only when
   another was imported before it (the sign of a hidden circle) fails here.
2. The top-level imports of the sources (what runs when a module is imported; imports inside a
   function run later) form a graph without a cycle. A function-level import that only hides a
   circle would show up as one once moved to the top; the function-level imports left defer a
   heavy library or say why they stay.
3. Counting every import (function-level and TYPE_CHECKING ones too), the graph still has no cycle.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

from fixtures import ROOMS, source_modules

ROOT = Path(__file__).resolve().parents[1]
# Preloaded by the parent before it forks one child per module, so each child pays only for
# shrinkbert's own code (all of them importing torch afresh takes minutes on two cores). Their
# state cannot hide a shrinkbert circle: no shrinkbert module is loaded in the parent.
HEAVY = ("numpy", "torch", "transformers", "datasets", "sklearn")
CHILD = r"""
import importlib, os, sys, traceback
for name in {heavy!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.split(".")[0] == "shrinkbert"]
failed = []
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc()[-3000:].encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status:
        failed.append(f"--- {{name}}\n{{message}}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
""".format(heavy=HEAVY)


def installed_modules() -> list[str]:
    names = set()
    for package in ROOMS.values():
        module = importlib.import_module(package)
        names.add(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            names.add(info.name)
    return sorted(n for n in names if n.rpartition(".")[2] != "__main__")  # __main__ runs the CLI


def test_every_module_imports_in_a_fresh_process():
    names = installed_modules()
    assert {"shrinkbert.core.data.load", "shrinkbert.core.data.tasks", "shrinkbert.core.kinds"} <= set(names)
    done = subprocess.run([sys.executable, "-c", CHILD, *names], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"modules that fail to import on their own:\n{done.stdout[-6000:]}{done.stderr[-2000:]}"


def test_the_data_package_re_exports_resolve():
    data = importlib.import_module("shrinkbert.core.data")
    for name, module in data._EXPORTS.items():
        assert getattr(data, name) is getattr(importlib.import_module(f"shrinkbert.core.data.{module}"), name)


# ---------------------------------------------------------------------------------------------
# the import graph of the sources



def top_level_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported: not inside a def, not under TYPE_CHECKING."""
    found = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append(child)
        found.extend(top_level_imports(child))
    return found


def lazy_exports(init: Path) -> dict[str, str]:
    """A package's `_EXPORTS = {name: submodule}` (names its __getattr__ imports on first use)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def every_import(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import of a module: at its top, inside functions and under TYPE_CHECKING."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def import_graph(which=top_level_imports) -> tuple[dict[str, set[str]], list[str]]:
    """({module: modules its imports load (`which`: the top-level ones by default)}, imports anywhere
    that go through a lazy export)."""
    modules = source_modules()
    graph, through_export = {}, []
    for name, path in modules.items():
        graph[name] = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in modules and \
                    modules[node.module].name == "__init__.py":
                lazy = lazy_exports(modules[node.module])
                through_export += [f"{name}:{node.lineno}: from {node.module} import {a.name}"
                                   for a in node.names if a.name in lazy]
        for node in which(tree):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
                continue
            if node.level or node.module not in modules:
                continue
            lazy = lazy_exports(modules[node.module]) if modules[node.module].name == "__init__.py" else {}
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    graph[name].add(f"{node.module}.{alias.name}")
                elif alias.name in lazy:
                    graph[name].add(f"{node.module}.{lazy[alias.name]}")
                else:
                    graph[name].add(node.module)
        graph[name].discard(name)
    return graph, through_export


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    on_path, done, path = set(), set(), []

    def visit(module):
        on_path.add(module)
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if target in on_path:
                return path[path.index(target):] + [target]
            if target not in done:
                cycle = visit(target)
                if cycle:
                    return cycle
        on_path.discard(module)
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_no_import_circle_among_top_level_imports():
    graph, _ = import_graph()
    assert len(graph) > 50 and graph["shrinkbert.core.data.load"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_import_circle_even_through_deferred_imports():
    """A function-level import (deferring a heavy library) or a TYPE_CHECKING one still joins two
    modules at run time or for a type checker: the rooms stay a tree with them counted too."""
    graph, _ = import_graph(every_import)
    cycle = find_cycle(graph)
    assert cycle is None, "import circle through a deferred import: " + " -> ".join(cycle)


def test_no_arrow_points_up_the_house():
    """The front door (shrinkbert.*) uses the rooms, the rooms use core, never the other way: core
    imports no room, and no room imports the front door, deferred imports included."""
    level = {"core": 0, "teachers": 1, "students": 1, "compress": 1, "eval": 1, "deploy": 1}

    def height(module: str) -> int:
        parts = module.split(".")
        return level.get(parts[1], 2) if len(parts) > 1 else 2

    graph, _ = import_graph(every_import)
    up = [f"{a} -> {b}" for a, targets in graph.items() for b in targets if height(b) > height(a)]
    assert not up, "arrows pointing up: " + ", ".join(sorted(up))


def test_compress_imports_nothing_from_students():
    """The rooms beside each other import one way: students may use compress (its ONNX tools, the static
    table), compress never uses students, deferred imports included."""
    graph, _ = import_graph(every_import)
    assert any(a.startswith("shrinkbert.students.") and b.startswith("shrinkbert.compress.")
               for a, targets in graph.items() for b in targets)  # the scan sees the one-way edges
    back = [f"{a} -> {b}" for a, targets in graph.items() if a.startswith("shrinkbert.compress.")
            for b in targets if b.startswith("shrinkbert.students")]
    assert not back, "compress imports students: " + ", ".join(sorted(back))


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_imports_data_names_from_their_modules():
    """Inside shrinkbert, `from shrinkbert.core.data import load_task` would hide the edge to load
    behind the package's lazy export; the modules themselves are named instead."""
    _, through_export = import_graph()
    assert not through_export, "\n".join(through_export)
