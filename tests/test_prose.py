"""The project speaks of itself alone, and its docstrings and `--help` say what a thing does.

Two checks over the prose: no development history (work sessions, issue numbers, numbered stops) in the
docs, recipes and tracked code; and no measurement narratives (speed-ups, seeds, intervals, timings
quoted from one run) in the package's docstrings, its stages' summaries or their Config help texts.
Measured figures live as data in bench/results/ and reach the docs through the generated results page.
"""
from __future__ import annotations

import ast
import dataclasses
import pkgutil
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_ORDINAL = (r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
            r"|(?:thir|four|fif|six|seven|eigh|nine)teenth|twentieth|thirtieth"
            r"|(?:twenty|thirty)-?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)"
            r"|\d+(?:st|nd|rd|th)")
# Development history. "session" alone is left to its technical senses (ONNX Runtime's
# InferenceSession, an HTTP session); a work session is caught by what names it.
HISTORY = [re.compile(pattern, re.IGNORECASE) for pattern in (
    rf"\b(?:this|that|earlier|previous|last|next|later|prior|{_ORDINAL})[ -]sessions?\b",
    r"\bsessions? of (?:work|development)\b",
    r"\bsession \d+\b",
    r"\bissue #?\d+",
    r"\(#\d+\)",
    r"\bstop \d+\b",
)]

# Figures of one measurement, in text that should say what a thing does.
MEASUREMENT = [re.compile(pattern) for pattern in (
    r"\b\d+(?:\.\d+)?x (?:faster|slower|the)\b",      # "1.26x faster", "2x the"
    r"\b\d+\.\d+x\b",                                  # "5.38x"
    r"\bn\.s\.(?![\"'])",                              # "(n.s., 3 seeds)"; the report's quoted "n.s." is its format
    r"\b\d+ seeds\b",
    r"\d ?± ?\d",                                     # "98.8% ± 0.8"; "mean ± sd" names the format
    r"\b\d+\.\d+%",                                    # "81.1%"
    r"\b\d+(?:\.\d+)? ?(?:ms|minutes|s) (?:on|against)\b",  # "10.6 minutes on 2 cores", "95 against"
    r"\bpoints (?:less|more)\b",                       # "kept 1.1 points less"
)]


def history(text: str) -> list[str]:
    """The phrases of development history in `text`."""
    return [match.group(0) for pattern in HISTORY for match in pattern.finditer(text)]


def measurements(text: str) -> list[str]:
    """The figures of one measurement quoted in `text`."""
    return [match.group(0) for pattern in MEASUREMENT for match in pattern.finditer(text)]


def _lines_with(text: str, finder) -> list[str]:
    return [f"{number}: {found}" for number, line in enumerate(text.splitlines(), 1) for found in finder(line)]


def _tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True,
                            timeout=60, check=True).stdout.decode().split("\0")
    return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def _history_in(paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}" for path in paths for line in _lines_with(path.read_text(), history)]


def test_the_checkers_flag_a_planted_narrative_and_pass_plain_help():
    planted = "distilled 1.26x faster a step and kept 1.1 points less (n.s., 3 seeds)"
    assert len(measurements(planted)) >= 3
    assert measurements("3L/H384 kept 98.8% ± 0.8 of the teacher")
    assert measurements("3L/H128 reached 81.1% at 5.2 ms against 6L/H64's 6.2 ms")
    assert measurements("took 10.6 minutes on 2 cores")
    assert history("as the twenty-fourth session found (issue 41)") == ["twenty-fourth session", "issue 41"]
    assert sorted(history("a disk that filled up (CI, stop 66, #42 (#42))")) == ["(#42)", "stop 66"]
    plain = ("temperature of the softened logits; raise it when the teacher is very sure of itself. "
             "Report cells read '+0.3 [-0.5, +1.1] n.s.'; \"n.s.\" = the interval covers zero. 4ms target. "
             "Retention is reported as mean ± sd.")
    assert not measurements(plain)
    assert not history("an ONNX Runtime InferenceSession, ort_session(path), session options, requests.Session(), "
                       "the session's outputs, a one-thread session, both sessions")


def test_the_code_speaks_of_the_project_alone():
    code = _tracked("*.py", "*.sh", "*.mjs", ".ci/run")
    code = [path for path in code if path.name != Path(__file__).name]  # this file names the patterns
    assert len(code) > 100
    found = _history_in(code)
    assert not found, "development history in the code (it belongs in commit messages):\n" + "\n".join(found)


def test_the_recipes_speak_of_the_project_alone():
    found = _history_in(_tracked("recipes/*.yaml", "recipes/**/*.yaml"))
    assert not found, "development history in the recipes:\n" + "\n".join(found)


def test_the_changelog_names_versions_not_sessions():
    changelog = ROOT / "CHANGELOG.md"
    if not changelog.is_file():
        pytest.skip("no CHANGELOG.md")
    found = _history_in([changelog])
    assert not found, "development history in CHANGELOG.md:\n" + "\n".join(found)


def test_docs_speak_of_the_project_alone():
    docs = _tracked("README.md", "docs/*.md", "docs/**/*.md", "mkdocs.yml")
    assert docs
    found = _history_in(docs)
    assert not found, "development history in the docs:\n" + "\n".join(found)


def _package_sources() -> list[Path]:
    """Every module of the shrinkbert package, found on disk without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("shrinkbert")
    assert spec is not None and spec.submodule_search_locations
    sources = []
    for module in pkgutil.walk_packages(list(spec.submodule_search_locations), "shrinkbert.",
                                        onerror=lambda name: None):
        found = module.module_finder.find_spec(module.name.rpartition(".")[2])  # type: ignore[union-attr]
        if found is not None and found.origin and found.origin.endswith(".py"):
            sources.append(Path(found.origin))
    return sources


def _docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    nodes = [tree, *(n for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return [(getattr(node, "lineno", 1), doc) for node in nodes if (doc := ast.get_docstring(node, clean=False))]


def test_package_docstrings_say_what_not_what_was_measured():
    sources = _package_sources()
    names = {str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path) for path in sources}
    assert {"shrinkbert/stages.py", "shrinkbert/core/config.py", "shrinkbert/students/distill.py"} <= names
    found = [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: {hit}" for path in sources for line, doc in _docstrings(path)
             for hit in measurements(doc)]
    assert not found, "measurement narratives in docstrings (figures belong in bench/results):\n" + "\n".join(found)


def test_help_texts_and_stage_summaries_say_what_not_what_was_measured():
    from shrinkbert.stages import STAGES

    texts = {f"{name} summary": stage.summary for name, stage in STAGES.items()}
    for name, stage in STAGES.items():
        config = stage.config_class
        assert config is not None and dataclasses.is_dataclass(config), name
        for field in dataclasses.fields(config):
            texts[f"{name} --{field.name.replace('_', '-')}"] = field.metadata.get("help", "")
    assert sum(bool(text) for text in texts.values()) > 100
    found = [f"{where}: {hit}" for where, text in texts.items() for hit in measurements(text)]
    assert not found, "measurement narratives in --help (figures belong in bench/results):\n" + "\n".join(found)


def test_the_one_line_description_names_every_use_and_the_cli_says_the_same():
    from shrinkbert import cli

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    description = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    for use in ("classifiers", "pair", "taggers", "NER", "POS", "extractive QA", "sentence embedders"):
        assert use in description, use
    assert description in " ".join(cli._help().split())
