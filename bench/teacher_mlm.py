"""Does domain-adaptive MLM help the teacher? Fine-tune with and without it, over seeds.

    python bench/teacher_mlm.py --mlm runs/demo/mlm --seeds 3

For each seed, fine-tunes the teacher twice on movie-snippets with fixed settings (2 epochs,
batch 32, lr 1e-4, max_length 128; --epochs changes the first): once from the PyPI MiniLM, once from the
domain-MLM artifact (--mlm: the demo's `mlm` stage, continued MLM on IMDB review sentences). Same stored split (split_seed 0) for
all; the seed changes the new head's initialisation and the batch order. Prints test accuracy per
run and mean ± sd per arm, and writes runs/bench/teacher_mlm.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mlm", default=str(ROOT / "runs/demo/mlm"), help="the domain-MLM artifact")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--epochs", type=float, default=2)
    p.add_argument("--out", default=str(ROOT / "runs/bench/teacher-mlm"))
    p.add_argument("--demo-teacher", default=str(ROOT / "runs/demo/teacher"),
                   help="the demo's teacher is the domain-MLM arm's seed 0 (same settings): reused when present "
                        "and made from --mlm with those settings ('' to train it again)")
    args = p.parse_args(argv)

    from shrinkbert import finetune

    arms = {"plain MiniLM": "minilm", "domain MLM first": args.mlm}
    results: dict[str, list[float]] = {arm: [] for arm in arms}
    started = time.perf_counter()
    for seed in range(args.seeds):
        for arm, model in arms.items():  # interleaved by seed: drift on the machine hits both arms
            out = Path(args.out) / f"{'mlm' if model != 'minilm' else 'plain'}-seed{seed}"
            demo = _same_run(args.demo_teacher, model, seed, args.epochs)
            if demo is not None:
                results[arm].append(demo)
                print(f"{arm:18s} seed {seed}: test accuracy {demo:.4f} (the demo's teacher, same settings)", flush=True)
                continue
            teacher = finetune(model=model, task="movie-snippets", epochs=args.epochs, learning_rate=1e-4,
                               batch_size=32, max_length=128, seed=seed, output_dir=str(out), checkpoint_every=0)
            results[arm].append(teacher.metrics["test_accuracy"])
            print(f"{arm:18s} seed {seed}: test accuracy {results[arm][-1]:.4f}", flush=True)
    print(f"\nmovie-snippets test accuracy (1,007 rows), {args.seeds} seeds, {time.perf_counter() - started:.0f} s:")
    for arm, values in results.items():
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"  {arm:18s} {statistics.fmean(values):.4f} ± {sd:.4f}  ({', '.join(f'{v:.4f}' for v in values)})")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "teacher_mlm.json").write_text(json.dumps(results, indent=2))
    return 0


def _same_run(path: str, model: str, seed: int, epochs: float) -> float | None:
    """The demo teacher's test accuracy when it is exactly this arm's run (same start, seed, settings)."""
    from shrinkbert.core.artifacts import is_artifact, read_manifest

    if not path or not is_artifact(path):
        return None
    manifest = read_manifest(path)
    cfg = manifest.get("config", {})
    parents = [p.get("path") for p in manifest.get("parents", []) if isinstance(p, dict)]
    same = (manifest.get("stage") == "finetune" and cfg.get("seed") == seed and cfg.get("epochs") == epochs
            and cfg.get("learning_rate") == 1e-4 and cfg.get("batch_size") == 32 and cfg.get("max_length") == 128
            and cfg.get("task") == "movie-snippets" and any(str(Path(model).resolve()) == str(Path(p).resolve())
                                                              for p in parents if p))
    return manifest["metrics"]["test_accuracy"] if same else None


if __name__ == "__main__":
    raise SystemExit(main())
