"""Guards on the code itself: no subprocess wait without a timeout (a hung child would block CI until
its own limit), and no test fixture inside the shipped package."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ("shrinkbert", "core", "teachers", "students", "compress", "eval")
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
