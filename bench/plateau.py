"""Students past the frontier's retention plateau: an ablation at the 15x shape, 2L/H160/A5/F640.

    python bench/plateau.py                                   # every arm, 3 seeds (hours on 2 cores)
    python bench/plateau.py --arms today,pca --seeds 1        # a subset
    python bench/plateau.py --ensemble T1,T2,T3 --best auto   # with an ensemble of three teachers
    python bench/plateau.py --tiny --teacher T --task data.csv --pretrain-corpus text.txt ...  # a dry run in seconds

Arms (each a set of distill options on top of the frontier's recipe: train split + 16,000
teacher-labelled IMDB sentences, logits + hidden KD, 2 epochs, lr 3e-4, max_length 128):
  today      the recipe with columns init: the student's residual stream = the teacher's 160 largest-norm dims
             (--init-embeddings columns; distill's default is auto, pca at this shape)
  pca        --init-embeddings pca: the stream projected on the top 160 principal components of the
             teacher's embedding table (every weight that reads or writes it is projected too)
  projected  --init-embeddings projected: pca, then the teacher's table through a learned 384->160
             projection, folded into a plain table when the student is saved
  assistant  --teacher = the 3L/H384/F768 student of the same seed (a teacher assistant; --assistant,
             default the frontier's runs/frontier/students/3L-H384-F768-seed{seed})
  ensemble   --teacher T1,T2,...: the teachers' soft labels averaged at T (--ensemble; skipped without)
  pretrained --student = a student of the shape pretrained first (`shrinkbert pretrain --teacher`): sliced
             from --pretrain-from (default the demo's domain-MLM teacher runs/demo/mlm, so its MLM head
             comes too), MLM + MLM-KD against it on --pretrain-corpus (default all) for
             --pretrain-epochs; one pretrained student (seed 0, cached by content) serves every seed
  wide       a full-width student (--wide-shape, default 2L/H384/A12/F1536): the teacher's whole residual
             stream and two of its layers, no projection at all (slower than 15x as it is)
  pruned     the wide student of the same seed, its attention heads and FFN neurons cut by `shrinkbert
             prune` (--prune-heads 0.5 and --prune-neurons 0.75 of them, the same count per layer, Taylor
             importance on task rows), then distilled again with the recipe (`distill --student`): the
             hidden width stays the teacher's, the cost goes (2L/H384, 6 heads, FFN 384)
  best       the options of the winning start arm (pca, projected or pretrained) and the winning teacher
             arm together (--best auto: each only when its mean retention beats today's; or name arms:
             --best pretrained,assistant)
Each arm distils --seeds students (seed 0..N-1), exports them (ONNX O2) and quantizes them (dynamic
int8), as the frontier does. One interleaved measurement (shrinkbert/frontier.py measure_frontier)
then times and scores the teacher (PyTorch fp32), its O2+int8 export and every int8 student on the
same test rows. The table (plateau.md/.json in --out) gives per arm retention mean ± sd over seeds and
the difference in retention to `today` (or --compare-to) with a paired bootstrap 95% interval over the test rows
(eval/stats.py; "n.s." where it covers zero). Students already in --out are reused. The table
names each arm's options, and the pretrained arm's words seen and pretraining hours.

--tiny runs the same arms on tiny models (a tiny shape, 2 steps each, 2 timed runs, no transfer
corpus, 1 thread): the plumbing's dry run, seconds on two cores (tests/test_plateau_bench.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = dict(epochs=2, learning_rate=3e-4, logits_weight=1.0, hidden_weight=1.0, transfer_corpus="imdb",
              max_transfer_rows=16000, max_length=128)
SHAPE = dict(layers=2, hidden=160, heads=5, intermediate=640)
ARMS = ("today", "pca", "projected", "assistant", "ensemble", "pretrained", "wide", "pruned", "best")
# how the student starts (one may win) and who teaches it (one may win): the best arm takes one of each
INIT_ARMS, TEACHER_ARMS = ("pca", "projected", "pretrained"), ("assistant", "ensemble")
TINY = dict(shape="1L/H16/A2/F32", wide_shape="1L/H32/A4/F64", max_steps=2, batch_size=8, max_length=32, runs=2, warmup=0, threads=1,
            transfer_corpus="", max_transfer_rows=0, pretrain_steps=2)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", default=str(ROOT / "runs/demo/teacher"), help="the fine-tuned teacher (default: the demo's)")
    p.add_argument("--task", default="", help="the task (default: the one the teacher was fine-tuned on)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated arms to run (of {', '.join(ARMS)})")
    p.add_argument("--seeds", type=int, default=3, help="students per arm (seeds 0..N-1)")
    p.add_argument("--assistant", default=str(ROOT / "runs/frontier/students/3L-H384-F768-seed{seed}"),
                   help="the assistant arm's teacher, {seed} filled in per seed (a distilled 3L/H384/F768 student)")
    p.add_argument("--ensemble", default="", help="comma-separated teachers for the ensemble arm (e.g. the teacher "
                   "fine-tuned at three seeds); the arm is skipped without")
    p.add_argument("--best", default="auto", help="the best arm's options: auto, none, or arms to combine (pca,assistant)")
    p.add_argument("--out", default=str(ROOT / "runs/bench/plateau"), help="where students and plateau.md/.json go")
    p.add_argument("--shape", default="2L/H160/A5/F640", help="student shape (frontier notation)")
    p.add_argument("--wide-shape", default="2L/H384/A12/F1536", help="wide and pruned arms: the full-width student")
    p.add_argument("--prune-heads", type=float, default=0.5, help="pruned arm: share of the wide student's heads removed")
    p.add_argument("--prune-neurons", type=float, default=0.75, help="pruned arm: share of its FFN neurons removed")
    p.add_argument("--compare-to", default="today", help="the arm every other is compared with (it must be run)")
    p.add_argument("--max-steps", type=int, default=0, help="optimizer steps per student (0: the recipe's 2 epochs)")
    p.add_argument("--max-transfer-rows", type=int, default=RECIPE["max_transfer_rows"],
                   help="transfer-corpus lines (0 with --transfer-corpus '' for none)")
    p.add_argument("--transfer-corpus", default=RECIPE["transfer_corpus"], help="transfer corpus ('' for none)")
    p.add_argument("--max-length", type=int, default=RECIPE["max_length"], help="tokens per row (training, timing, eval)")
    p.add_argument("--max-eval-rows", type=int, default=0, help="first N test rows (0: all)")
    p.add_argument("--runs", type=int, default=30, help="timed calls per variant in the measurement")
    p.add_argument("--threads", type=int, default=0, help="threads (0: all cores)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls per variant first")
    p.add_argument("--batch-size", type=int, default=32, help="distillation batch size")
    p.add_argument("--pretrain-from", default=str(ROOT / "runs/demo/mlm"),
                   help="pretrained arm: the model the student is sliced from and (MLM-KD) taught by; the demo's "
                        "domain-MLM teacher by default (it has the MLM head); falls back to --teacher without KD")
    p.add_argument("--pretrain-corpus", default="all", help="pretrained arm: the text (all: every built-in corpus)")
    p.add_argument("--pretrain-epochs", type=float, default=1.0, help="pretrained arm: passes over the text")
    p.add_argument("--pretrain-steps", type=int, default=0, help="pretrained arm: optimizer steps (0: from epochs)")
    p.add_argument("--pretrain-kd-weight", type=float, default=1.0, help="pretrained arm: MLM-KD weight (0: MLM only)")
    p.add_argument("--pretrain-lr", type=float, default=5e-4, help="pretrained arm: peak learning rate")
    p.add_argument("--no-resume", action="store_true", help="redo students already in --out")
    p.add_argument("--tiny", action="store_true", help="a dry run on tiny models: " + ", ".join(
        f"{k.replace('_', '-')} {v}" for k, v in TINY.items()))
    args = p.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    return args


def arm_options(arm: str, seed: int, args, chosen: dict[str, dict]) -> dict | None:
    """The distill options of one arm at one seed (None: the arm cannot run here)."""
    if arm == "today":  # the recipe as it was: columns, named since the default became auto (pca when narrower)
        return {"init_embeddings": "columns"}
    if arm == "pretrained":
        return {"student": args.pretrained} if getattr(args, "pretrained", None) else None
    if arm in INIT_ARMS:
        return {"init_embeddings": arm}
    if arm == "assistant":
        path = args.assistant.format(seed=seed)
        return {"teacher": path} if Path(path).is_dir() else None
    if arm == "ensemble":
        return {"teacher": args.ensemble} if args.ensemble else None
    if arm == "wide":
        return {"shape": args.wide_shape}
    if arm == "pruned":
        return {"shape": args.wide_shape, "prune": {"head_fraction": args.prune_heads,
                                                    "neuron_fraction": args.prune_neurons}}
    if arm == "best":
        options: dict = {}
        for name in chosen.get("best", {}).get("arms", []):
            found = arm_options(name, seed, args, chosen)
            if found is None:
                return None
            options.update(found)
        return options or None
    raise SystemExit(f"error: unknown arm {arm!r} (arms: {', '.join(ARMS)})")


def pick_best(args, table: dict) -> list[str]:
    """--best auto: the init arm and the teacher arm with the highest mean retention, each only if
    above today's; or the arms --best names."""
    if args.best == "none":
        return []
    if args.best != "auto":
        return [a for a in args.best.split(",") if a]
    by_arm = {row["given"]: row.get("retention_mean") for row in table["points"] if row.get("seeds")}
    today = by_arm.get(args.compare_to)
    picked = []
    for group in (INIT_ARMS, TEACHER_ARMS):
        scored = [(by_arm[a], a) for a in group if by_arm.get(a) is not None]
        if scored and today is not None and max(scored)[0] > today:
            picked.append(max(scored)[1])
    return picked


def distil_arm(arm: str, args, cfg, chosen: dict, shape: dict) -> dict:
    """Distil, export and quantize one arm's students: a frontier point named by the arm."""
    from transformers import AutoConfig

    from shrinkbert.frontier import _int8, _stage, parse_shapes
    from shrinkbert.students.shape import model_shape

    point = {"speedup_target": None, "target_ms": None, "given": arm, "students": [], "shape": None}
    recipe = {**RECIPE, "max_transfer_rows": args.max_transfer_rows, "transfer_corpus": args.transfer_corpus,
              "max_length": args.max_length, "batch_size": args.batch_size,
              **({"max_steps": args.max_steps} if args.max_steps else {})}
    recipe = {k: v for k, v in recipe.items() if v not in ("", None)}
    for seed in range(args.seeds):
        options = arm_options(arm, seed, args, chosen)
        if options is None:
            point["unmet"] = f"{arm}: not available here (see --help)"
            print(f"plateau: skipping {arm}: {point['unmet']}", file=sys.stderr, flush=True)
            break
        where = Path(args.out) / "students" / f"{arm}-seed{seed}"
        options = dict(options)
        if "shape" in options:  # the wide and pruned arms: another shape than the ablation's
            wide = parse_shapes(options.pop("shape"))[0]
            prune = options.pop("prune", None)
            if prune:  # the same seed's wide student, cut, then distilled again from the cut
                wide_student = _stage("distill", Path(args.out) / "students" / f"wide-seed{seed}",
                                      not args.no_resume, **_settings(args, recipe, wide, {}, seed, cfg))
                cut = _stage("prune", Path(args.out) / "students" / f"wide-seed{seed}-pruned", not args.no_resume,
                             model=str(wide_student), head_scope="per_layer", max_length=args.max_length, **prune,
                             **({"task": args.task} if args.task else {}))
                options["student"] = str(cut)
            else:
                shape = wide
        # a pretrained student is distilled into as it is (distill --student takes no shape fields)
        student = _stage("distill", where, not args.no_resume, **_settings(args, recipe, shape, options, seed, cfg))
        # from its config, not its manifest: a pruned student's heads are counted as kept (students/shape.model_shape)
        point["shape"] = model_shape(AutoConfig.from_pretrained(student))
        point["students"].append({"seed": seed, "student": str(student),
                                  "int8": str(_int8(student, where, cfg, not args.no_resume))})
    return point


def _settings(args, recipe: dict, shape: dict, options: dict, seed: int, cfg) -> dict:
    """One student's distill settings: the recipe, the shape (unless it starts from a given student), the arm's options."""
    return {"teacher": args.teacher, **({"task": args.task} if args.task else {}), **recipe,
            **({} if "student" in options else shape), **options, "seed": seed, "threads": cfg.threads,
            "max_eval_rows": args.max_eval_rows}


def pretrain_student(args, shape: dict, cfg) -> Path:
    """The pretrained arm's student: `shrinkbert pretrain` of the arm's shape, once (cached by content)."""
    from shrinkbert.frontier import _stage

    source = args.pretrain_from if Path(args.pretrain_from).is_dir() else args.teacher
    kd = args.pretrain_kd_weight if source == args.pretrain_from else 0.0  # the fine-tuned teacher has no MLM head
    settings = {"teacher": source, **{k: v for k, v in shape.items() if k in ("layers", "hidden", "heads", "intermediate")},
                "corpus": [c for c in args.pretrain_corpus.split(",") if c], "kd_weight": kd,
                "max_length": args.max_length, "batch_size": args.batch_size, "seed": 0,
                "learning_rate": args.pretrain_lr, "checkpoint_every": 0 if args.tiny else 500,
                **({"max_steps": args.pretrain_steps} if args.pretrain_steps else {"epochs": args.pretrain_epochs}),
                **({"cache_dir": cfg.cache_dir} if cfg.cache_dir else {})}
    return _stage("pretrain", Path(args.out) / "pretrained", not args.no_resume, **settings)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from shrinkbert.core.config import build_config
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.core.device import describe_machine
    from shrinkbert.frontier import Config, _int8, format_table, measure_frontier, parse_shapes

    print("machine:", describe_machine(), flush=True)
    if not Path(args.teacher).is_dir():
        print(f"error: teacher {args.teacher} missing: run bash scripts/demo.sh first (or give --teacher)", file=sys.stderr)
        return 2
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or args.compare_to not in arms or args.compare_to == "best":
        print(f"error: arms must come from {', '.join(ARMS)} and include --compare-to ({args.compare_to}), the "
              "reference", file=sys.stderr)
        return 2
    shape = parse_shapes(args.shape)[0]
    threads = args.threads or os.cpu_count() or 1
    cfg = build_config(Config, {"teacher": args.teacher, "output_dir": args.out, "max_length": args.max_length,
                                "max_eval_rows": args.max_eval_rows, "runs": args.runs, "warmup": args.warmup,
                                "threads": threads,
                                "compare_to": args.compare_to, **({"task": args.task} if args.task else {})})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chosen: dict[str, dict] = {}
    args.pretrained = None
    if "pretrained" in arms or (args.best not in ("auto", "none") and "pretrained" in args.best.split(",")):
        args.pretrained = str(pretrain_student(args, shape, cfg))
    points = [distil_arm(arm, args, cfg, chosen, shape) for arm in arms if arm != "best"]
    spec = resolve_spec(cfg, [args.teacher])
    teacher_int8 = _int8(Path(args.teacher), out / "teacher", cfg, not args.no_resume)
    if "best" in arms:
        # --best auto: a first measurement picks the winners; the final one below re-times everything together
        picked = pick_best(args, measure_frontier(cfg, spec, Path(args.teacher), teacher_int8, points, threads)
                           if args.best == "auto" else {"points": []})
        chosen["best"] = {"arms": picked}
        print(f"plateau: best = {' + '.join(picked) or 'nothing beat today'}", file=sys.stderr, flush=True)
        if picked:
            points.append(distil_arm("best", args, cfg, chosen, shape))
    table = measure_frontier(cfg, spec, Path(args.teacher), teacher_int8, points, threads)
    table["best"] = chosen.get("best")
    table["arms"] = {p["given"]: {"students": [s["student"] for s in p["students"]], "unmet": p.get("unmet")}
                     for p in points}
    names = iter(row["given"] for row in table["points"])
    lines = [f"| {next(names)} |" + line[len("| shape given |"):] if line.startswith("| shape given |") else line
             for line in format_table(table).replace("Frontier:", "Plateau ablation:", 1)
             .replace(f"shapes picked on {table['runtime']}, ", "", 1)
             .replace("| target |", "| arm |", 1).splitlines()]
    lines += ["", "Arms: " + "; ".join(f"{row['given']} = {_describe(row['given'], args, chosen) or 'the recipe'}"
                                       for row in table["points"])]
    if args.pretrained:
        table["pretrained"] = pretrained_record(Path(args.pretrained))
        lines += ["", "Pretrained student: " + describe_pretrained(table["pretrained"])]
    (out / "plateau.json").write_text(json.dumps(table, indent=2, default=str))
    (out / "plateau.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def pretrained_record(path: Path) -> dict:
    """What the pretrained student saw: its words, passes, time and losses (from its manifest)."""
    from shrinkbert.core.artifacts import read_manifest

    manifest = read_manifest(path)
    metrics, config = manifest.get("metrics", {}), manifest.get("config", {})
    return {"path": str(path), "corpus_words": manifest.get("corpus_words"), "words_seen": metrics.get("words_seen"),
            "train_time_s": metrics.get("train_time_s"), "words_per_s": metrics.get("words_per_s"),
            "steps": metrics.get("steps"), "kd_weight": config.get("kd_weight"), "teacher": config.get("teacher"),
            "heldout_mlm_loss": [metrics.get("heldout_mlm_loss_before"), metrics.get("heldout_mlm_loss_after")]}


def describe_pretrained(record: dict) -> str:
    words = record.get("corpus_words") or {}
    loss = record.get("heldout_mlm_loss") or [None, None]
    return (f"{sum(words.values()):,} words of text ({', '.join(f'{k} {v:,}' for k, v in words.items())}), "
            f"{record.get('words_seen') or 0:,.0f} words seen in {(record.get('train_time_s') or 0) / 3600:.2f} h "
            f"({record.get('words_per_s') or 0:,.0f} words/s, {record.get('steps')} steps), MLM"
            + (f" + MLM-KD (weight {record['kd_weight']:g})" if record.get("kd_weight") else " only")
            + f" from {record.get('teacher')}; held-out MLM loss "
            + (f"{loss[0]:.2f} -> {loss[1]:.2f}" if None not in loss else "n/a") + f" ({record['path']})")


def _describe(arm: str, args, chosen: dict) -> str:
    """An arm's distill options as text (seed 0's, with the assistant's path shown as its pattern)."""
    options = arm_options(arm, 0, args, chosen) or {}
    if options.get("teacher") == args.assistant.format(seed=0):
        options["teacher"] = args.assistant
    return ", ".join(f"{k}={v}" for k, v in options.items())


if __name__ == "__main__":
    sys.exit(main())
