"""Breaks the test suite must catch: each mutant below is a hand-written change of one line, of the
kind a suite of short inputs alone lets through (a bundle cutting texts at half its max_length), applied
to a copy of the working tree; the tests named beside it run there, and a mutant whose tests all pass
has survived. The script exits 1 if any survives, 0 when every one is caught.

    .venv/bin/python scripts/mutants.py            # all of them, a few minutes on 2 cores
    .venv/bin/python scripts/mutants.py --list     # what each one breaks, and its tests
    .venv/bin/python scripts/mutants.py truncation # the ones whose name holds a word

The copy sits beside a link to ../shared, so the real-data tests find it as in the checkout; the
copy's own package comes first on PYTHONPATH, so subprocesses (the CLI, a bundle's predict.py) run
the mutant, not the installed kit.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_BEHIND = (".git", ".venv", ".web", "runs", "node_modules", "__pycache__", "*.egg-info", ".pytest_cache")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant("sequence bundle truncates at half its max_length", "compress/edge_predictor.py",
           "self.tokenizer.enable_truncation(self.max_length)", "self.tokenizer.enable_truncation(self.max_length // 2)",
           ("tests/test_compress.py::test_bundle_runs_without_torch_and_agrees_with_onnx",)),
    Mutant("sequence bundle pads on the left", "compress/edge_predictor.py",
           'self.tokenizer.enable_padding(pad_id=int(meta.get("pad_token_id", 0)), pad_token=meta.get("pad_token", "[PAD]"))',
           'self.tokenizer.enable_padding(direction="left", pad_id=int(meta.get("pad_token_id", 0)), '
           'pad_token=meta.get("pad_token", "[PAD]"))',
           ("tests/test_compress.py::test_bundle_runs_without_torch_and_agrees_with_onnx",)),
    Mutant("bundle feeds no token types (pairs read as one text)", "compress/edge_predictor.py",
           '"token_type_ids": [e.type_ids for e in encodings]}',
           '"token_type_ids": [[0] * len(e.ids) for e in encodings]}',
           ("tests/test_inheritance.py",)),
    Mutant("token bundle truncates at half its max_length", "compress/edge_predictor.py",
           "self.tokenizer.enable_truncation(self.max_length)", "self.tokenizer.enable_truncation(self.max_length // 2)",
           ("tests/test_token_bundle.py::test_token_bundle_parity_is_word_level",)),
    Mutant("embedding graph bundle truncates at half its max_length", "compress/static_predictor.py",
           'self.tokenizer.enable_truncation(int(meta["max_length"]))',
           'self.tokenizer.enable_truncation(int(meta["max_length"]) // 2)',
           ("tests/test_embedding_bundle.py::test_the_onnx_bundle_runs_without_torch_and_gives_the_int8_models_vectors",)),
    Mutant("static bundle forgets to normalise", "compress/static_predictor.py",
           "    return normalize_rows(sums)", "    return sums",
           ("tests/test_embedding_bundle.py::test_the_bundle_runs_without_torch_and_gives_the_students_vectors",)),
    Mutant("static bundle reads BERT's control characters as word breaks", "compress/token_ids.py",
           "return self.by_word and text.isascii() and not SPLIT_DIFFERS.search(text)",
           "return self.by_word and text.isascii()",
           ("tests/test_token_ids.py::test_word_lookups_give_encodes_ids_on_real_and_tricky_text",)),
    Mutant("the embeddings recipe bundles the fp32 graph, not the int8 one", "recipes/embeddings.yaml",
           'with: {model: "${student-int8}"}', 'with: {model: "${student-onnx}"}',
           ("tests/test_embedding_recipe.py::test_the_report_has_a_row_per_artifact_and_the_bundles_equal_their_models"
            "[embeddings.yaml]",)),
    Mutant("QA answers cut one character short", "core/kinds/edge/qa_edge.py",
           "int(offsets[start][0]), int(offsets[end][1])))", "int(offsets[start][0]), int(offsets[end][1]) - 1))",
           ("tests/test_qa_edge.py",)),
    Mutant("verify-on-load does nothing", "core/verify.py",
           "if skipped() or not manifest_file.is_file():", "if True:",
           ("tests/test_verify.py::test_a_flipped_weight_file_stops_the_next_stage",)),
    Mutant("later stages do not inherit the split seed", "core/data/dataspec.py",
           'split_seed=int(values["split_seed"])', "split_seed=0",
           ("tests/test_inheritance.py",)),
)


def copy_tree(into: Path) -> Path:
    """The working tree (as edited, not as committed) under into/repo, with into/shared -> ../shared."""
    repo = into / "repo"
    shutil.copytree(ROOT, repo, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
    if (ROOT.parent / "shared").exists():
        (into / "shared").symlink_to(ROOT.parent / "shared")
    return repo


def run_tests(repo: Path, tests) -> tuple[int, str]:
    """pytest's exit code on `tests` in the copy, and its last lines."""
    env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header",
                           *tests], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return done.returncode, "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])


def run_mutant(mutant: Mutant, repo: Path) -> tuple[bool, float, str]:
    """(survived, seconds, the tests' last lines) with the mutant applied; the file is restored after."""
    target = repo / mutant.file
    original = target.read_text()
    if original.count(mutant.old) != 1:  # the code moved: the mutant must be rewritten, not skipped
        raise SystemExit(f"error: mutant '{mutant.name}': {mutant.file} holds its line "
                         f"{original.count(mutant.old)} times, not once; update scripts/mutants.py")
    target.write_text(original.replace(mutant.old, mutant.new))
    start = time.perf_counter()
    try:
        code, tail = run_tests(repo, mutant.tests)
    finally:
        target.write_text(original)
    if code not in (0, 1):  # 2-5: the run itself broke (no such test, collection error)
        raise SystemExit(f"error: mutant '{mutant.name}': pytest exited {code}:\n{tail}")
    return code == 0, time.perf_counter() - start, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Apply each hand-written mutant to a copy of the tree and check "
                                                 "that its tests fail.")
    parser.add_argument("words", nargs="*", help="run only mutants whose name holds one of these words")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.words or any(w in m.name for w in args.words)]
    if args.list or not chosen:
        for m in chosen or MUTANTS:
            print(f"{m.name}\n  {m.file}: {m.old!r} -> {m.new!r}\n  caught by: {' '.join(m.tests)}")
        return 0 if chosen else 2
    survivors = []
    with tempfile.TemporaryDirectory(prefix="shrinkbert-mutants-") as scratch:
        repo = copy_tree(Path(scratch))
        # First the same tests on the unmutated copy: a mutant counts as caught only where they pass
        start = time.perf_counter()
        code, tail = run_tests(repo, sorted({test for m in chosen for test in m.tests}))
        if code != 0:
            print(f"error: the mutants' tests fail on the unmutated tree (pytest exited {code}):\n{tail}",
                  file=sys.stderr)
            return 1
        print(f"[0/{len(chosen)}] baseline {time.perf_counter() - start:5.0f} s  the tests pass unmutated", flush=True)
        for i, mutant in enumerate(chosen, 1):
            survived, seconds, tail = run_mutant(mutant, repo)
            print(f"[{i}/{len(chosen)}] {'SURVIVED' if survived else 'caught  '} {seconds:5.0f} s  {mutant.name}",
                  flush=True)
            if survived:
                survivors.append(mutant)
                print("    " + tail.replace("\n", "\n    "))
    if survivors:
        print(f"error: {len(survivors)} of {len(chosen)} mutants survived the tests meant to catch them: "
              + "; ".join(m.name for m in survivors), file=sys.stderr)
        return 1
    print(f"mutants: all {len(chosen)} caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
