"""Guards on the code itself: no subprocess wait without a timeout (a hung child would block CI until
its own limit), no test fixture inside the shipped package, and the CI mutation check still current."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ("shrinkbert", "core", "teachers", "students", "compress", "eval", "deploy")
WAITS = {"run", "call", "check_call", "check_output"}  # subprocess.X(...) waits for the child
# Where no timeout fits, and why (file: function name).
ALLOWED = {
    # the wait that follows kill() (SIGKILL cannot be ignored), after a wait with a timeout
    "eval/workers.py": {"self.process.wait"},
}


def untimed_waits(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or any(k.arg == "timeout" for k in node.keywords):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else ""
        called = ast.unparse(func)
        if (called.startswith("subprocess.") and name in WAITS) or (name in ("wait", "communicate") and not node.args
                                                                    and called not in ("self._stop.wait",)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {called}(...)")
    return found


def test_every_subprocess_wait_in_the_package_and_tests_has_a_timeout():
    files = [p for root in (*PACKAGE, "tests") for p in sorted((ROOT / root).rglob("*.py"))]
    found = [line for path in files for line in untimed_waits(path)
             if line.split(": ", 1)[1].removesuffix("(...)") not in ALLOWED.get(line.split(":")[0], set())]
    assert not found, "subprocess waits without timeout=:\n" + "\n".join(found)


def test_no_test_fixture_ships_in_the_package():
    assert not (ROOT / "core" / "testing.py").exists()
    shipped = [p for root in PACKAGE for p in (ROOT / root).rglob("*.py")]
    assert not [p for p in shipped if "from fixtures import" in p.read_text()]


def test_every_mutant_of_the_ci_mutation_check_still_finds_its_line_and_its_tests():
    """scripts/mutants.py (run by .ci/run) breaks one line per mutant: a line that moved would make it
    refuse in CI; caught here first, in the default run."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
    mutants = sys.modules["mutants"] = importlib.util.module_from_spec(spec)  # its dataclass looks itself up
    spec.loader.exec_module(mutants)
    assert len(mutants.MUTANTS) >= 8
    for mutant in mutants.MUTANTS:
        assert (ROOT / mutant.file).read_text().count(mutant.old) == 1, mutant.name
        for test in mutant.tests:
            path, _, name = test.partition("::")
            assert (ROOT / path).is_file(), test
            assert not name or f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), test
