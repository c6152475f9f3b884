"""What each part of two-stage distillation buys, at one student shape, over seeds.

    python bench/ablation.py --frontier runs/frontier --speedup 15 --seeds 3

Takes the shape the frontier picked for a speed-up target and the frontier's own distillation
settings, and distils that shape again with one part changed:
  - no transfer set (train split only);
  - general distillation first (TinyBERT's stage 1: the student distilled as a masked LM from the
    domain-MLM teacher on IMDB sentences, hidden + attention + MLM-logit losses), then the same task
    distillation with the transfer set, starting from it.
The full recipe's figures come from the frontier run itself (its students, same shape and seeds).
Retention here is the PyTorch student's test accuracy over the teacher's (the frontier's is int8).
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
    p.add_argument("--frontier", default=str(ROOT / "runs/frontier"))
    p.add_argument("--speedup", type=float, default=15)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--mlm-teacher", default=str(ROOT / "runs/demo/mlm"))
    p.add_argument("--general-rows", type=int, default=16000, help="IMDB sentences for general distillation")
    p.add_argument("--general-epochs", type=float, default=1)
    p.add_argument("--arms", default="no-transfer,general", help="comma-separated: no-transfer, general")
    args = p.parse_args(argv)

    from shrinkbert import distill

    table = json.loads((Path(args.frontier) / "frontier.json").read_text())
    point = next(pt for pt in table["points"] if abs(pt["speedup_target"] - args.speedup) < 1e-6)
    cfg = table["config"]
    shape = {k: point["shape"][k] for k in ("layers", "hidden", "heads", "intermediate")}
    common = dict(teacher=cfg["teacher"], epochs=cfg["epochs"], learning_rate=cfg["learning_rate"],
                  batch_size=cfg["batch_size"], hidden_weight=cfg["hidden_weight"],
                  attention_weight=cfg["attention_weight"], checkpoint_every=0)
    transfer = dict(transfer_corpus=cfg["transfer_corpus"], max_transfer_rows=cfg["max_transfer_rows"])
    out = Path(args.frontier) / "ablation" / f"{args.speedup:g}x"
    full = [s for s in point["students"]]
    results: dict[str, list[float]] = {}
    started = time.perf_counter()
    arms = [a for a in args.arms.split(",") if a]
    general_student = None
    if "general" in arms:
        general_student = distill(teacher=args.mlm_teacher, objective="masked-lm", corpus="imdb", **shape,
                                  max_train_rows=args.general_rows, epochs=args.general_epochs,
                                  learning_rate=cfg["learning_rate"], batch_size=cfg["batch_size"],
                                  hidden_weight=1.0, attention_weight=1.0, logits_weight=1.0,
                                  output_dir=str(out / "general"), checkpoint_every=0)
        print(f"general distillation: {general_student.metrics.get('train_loss')} final loss, "
              f"{general_student.metrics.get('train_time_s', 0):.0f} s", flush=True)
    for seed in range(args.seeds):
        for arm in arms:
            kwargs = dict(common, seed=seed, output_dir=str(out / f"{arm}-seed{seed}"))
            if arm == "no-transfer":
                student = distill(**kwargs, **shape)
            elif arm == "general":
                student = distill(**kwargs, **transfer, student=str(general_student.path))
            else:
                raise SystemExit(f"error: unknown arm {arm!r}")
            results.setdefault(arm, []).append(student.metrics["retention"])
            print(f"{arm:12s} seed {seed}: retention {student.metrics['retention']:.4f} "
                  f"(test accuracy {student.metrics['test_accuracy']:.4f})", flush=True)
    print(f"\nablation at the {args.speedup:g}x shape {shape}, {args.seeds} seeds, "
          f"{time.perf_counter() - started:.0f} s (PyTorch student retention):")
    for arm, values in results.items():
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"  {arm:12s} {100 * statistics.fmean(values):.2f}% ± {100 * sd:.2f}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablation.json").write_text(json.dumps({"shape": shape, "results": results, "full": full}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
