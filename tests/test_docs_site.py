"""The manual builds, the front page's links land, and the examples are sound.

`mkdocs build --strict` fails on a broken link, a missing #anchor, an unresolved API reference or a
page in the nav that does not exist; the build here also shows that each section of the nav made a
page, that the generated command-line reference names every stage, and that the API reference holds
every public function. README.md is outside the site, so its relative links are checked here, anchors
included. The examples compile (tests/test_static.py type-checks them with pyright).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# One page of each section of the nav (mkdocs.yml), as built: the site's folder for each page.
SECTION_PAGES = ["index.html", "getting-started", "teachers", "classify", "data", "deploy", "recipes",
                 "reference/cli", "reference/api", "contributing", "testing", "results", "changelog"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
ANCHOR_ID = re.compile(r'\bid="([^"]+)"')
TWO_COMMANDS = ("bash scripts/demo.sh     # set up .venv, then run the demo",
                "bash scripts/test.sh     # set up .venv, then run the tests")


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is not installed: run scripts/setup.sh (requirements.txt pins it)"
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([_tool("mkdocs"), "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=_quiet_env())
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + (done.stderr or done.stdout)[-4000:]
    return out


def _quiet_env() -> dict[str, str]:
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1"}


def _page(site: Path, page: str) -> Path:
    return site / page if page.endswith(".html") else site / page / "index.html"


def test_the_site_builds_strict_with_a_page_for_every_section(site):
    missing = [page for page in SECTION_PAGES if not _page(site, page).is_file()]
    assert not missing, f"no page built for {missing}"


def test_the_cli_reference_names_every_command_and_its_flags(site):
    from shrinkbert.stages import STAGES

    html = _page(site, "reference/cli").read_text()
    absent = [name for name in ["run", *STAGES] if f'id="shrinkbert-{name}"' not in html]
    assert not absent, f"the command-line reference has no section for {absent}"
    assert "--max-length" in html and "--target" in html and "--no-verify" in html


def test_the_api_reference_holds_every_public_function_and_the_artifact(site):
    import shrinkbert

    html = _page(site, "reference/api").read_text()
    ids = set(ANCHOR_ID.findall(html))
    public = [name for name in shrinkbert.__all__ if name != "Artifact"]
    absent = [name for name in public if f"shrinkbert.{name}" not in ids]
    assert not absent, f"the API reference has no entry for {absent}"
    assert "shrinkbert.api.Artifact" in ids
    assert "<td><code>max_length</code></td>" in html, "the stage functions' parameters are not rendered as tables"


def _readme_links() -> list[str]:
    return [target for target in LINK.findall(README.read_text())
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


def test_every_relative_link_in_the_readme_lands(site):
    broken = []
    for target in _readme_links():
        path, _, anchor = target.partition("#")
        if not (ROOT / path).exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and path.startswith("docs/") and path.endswith(".md"):
            built = _page(site, path[len("docs/"):-len(".md")] if path != "docs/index.md" else "index.html")
            if anchor not in ANCHOR_ID.findall(built.read_text()):
                broken.append(f"{target}: the built page has no #{anchor}")
    assert _readme_links(), "no relative links found in README.md"
    assert not broken, "README.md links that do not land:\n" + "\n".join(broken)


def test_the_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md is {len(lines)} lines; the front page fits in 150"
    first_block = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert [line.startswith(command) for line, command in zip(lines[first_block + 1:], TWO_COMMANDS)] == [True, True], \
        "the first code block of README.md is the demo and test commands"


@pytest.mark.skipif(not EXAMPLES, reason="no examples/")
def test_the_examples_compile():
    """(pyright checks their calls in tests/test_static.py, in the suite's one pyright run.)"""
    for example in EXAMPLES:
        subprocess.run([sys.executable, "-m", "py_compile", str(example)], check=True, timeout=60,
                       capture_output=True)
