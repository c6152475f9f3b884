"""Imports between packages point one way.

The packages are the rooms (teachers, students, compress, eval, deploy), the front door (shrinkbert's
own modules), core's subpackages (core.data, core.kinds, core.families, core.metrics, ...) and core's
own modules. An import counts wherever it is written (at the top, inside a function, under
TYPE_CHECKING), and so does a module a registry loads by name: a string that names a module
("shrinkbert.compress.prune", "shrinkbert.students.configs:DistillConfig") and
`importlib.import_module(f"{__name__}.{...}")`, which may load any module of the package. Two packages
that reach each other, by any of these, are a two-way pair.
"""
from __future__ import annotations

import ast
from pathlib import Path

from fixtures import ROOMS, source_modules

ROOT = Path(__file__).resolve().parents[1]


def package_of(module: str) -> str:
    """The package a module counts in: its room, core's subpackage ("core.data"), or "core"."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] not in ROOMS or parts[1] == "shrinkbert":
        return "shrinkbert"
    if parts[1] == "core" and len(parts) > 2 and (ROOT / "core" / parts[2]).is_dir():
        return f"core.{parts[2]}"
    return parts[1]


def reached(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `name` imports or loads by name, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def add(dotted: str, names=()) -> None:
        for alias in names:
            if f"{dotted}.{alias}" in modules:
                found.add(f"{dotted}.{alias}")
                continue
            found.add(dotted)
        if not names:
            found.add(dotted)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base in modules:
                add(base, [a.name for a in node.names])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            dotted = node.value.partition(":")[0]
            if "." in dotted and dotted in modules:  # a module path, not the word "shrinkbert"
                found.add(dotted)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args \
                and isinstance(node.args[0], ast.JoinedStr) and ast.unparse(node.args[0]).startswith("f'{__name__}."):
            found |= {m for m in modules if m.startswith(name + ".")}
    found.discard(name)
    return found


def package_edges() -> dict[tuple[str, str], list[str]]:
    """{(from package, to package): ["module -> module", ...]} across packages."""
    modules = source_modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        for target in sorted(reached(name, path, modules)):
            pair = (package_of(name), package_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, []).append(f"{name} -> {target}")
    return edges


def test_no_two_packages_import_each_other():
    edges = package_edges()
    assert ("core.data", "core") in edges and ("shrinkbert", "core") in edges  # the graph is read at all
    two_way = [f"{a} <-> {b}: {edges[a, b][:3]} / {edges[b, a][:3]}" for a, b in sorted(edges)
               if a < b and (b, a) in edges]
    assert not two_way, "packages that import each other:\n" + "\n".join(two_way)


def test_modules_loaded_by_name_count():
    """The kinds' registry loads its modules by name, the stages' registry names its modules as strings."""
    modules = source_modules()
    kinds = reached("shrinkbert.core.kinds", modules["shrinkbert.core.kinds"], modules)
    assert {"shrinkbert.core.kinds.sequence", "shrinkbert.core.kinds.qa"} <= kinds
    stages = reached("shrinkbert.stages", modules["shrinkbert.stages"], modules)
    assert {"shrinkbert.compress.prune", "shrinkbert.students.distill"} <= stages


def test_the_finder_sees_a_two_way_pair():
    assert package_of("shrinkbert.core.data.load") == "core.data" and package_of("shrinkbert.core.errors") == "core"
    assert package_of("shrinkbert.api") == "shrinkbert" and package_of("shrinkbert.compress.prune") == "compress"
