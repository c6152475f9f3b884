"""The accuracy-speed frontier: students distilled to a ladder of speed-ups, over seeds, in one table.

    shrinkbert frontier --teacher runs/demo/teacher --speedups 2x,4x,8x,15x,25x --seeds 3 \\
        --output-dir runs/frontier [--transfer-corpus imdb --max-transfer-rows 50000] [--shapes 3L/H128]

For each speed-up target N (against the teacher in PyTorch fp32, batch 1, sequence max_length):
  1. the latency target is the teacher's probed p50 / N, and the student's shape is picked by
     timing candidate shapes on the runtime the student ships in (--runtime, default onnx-int8:
     students/shape.py pick_by_latency); seed 0 picks the shape, the other seeds reuse it;
  2. each seed distils a student of that shape (students/distill.py, every distill option here
     passes through), exports it (ONNX, O2 fusions) and quantizes it (dynamic int8);
  3. one interleaved measurement (eval/measure.py) times the teacher in PyTorch fp32, the
     teacher's own O2 + int8 ONNX export and every int8 student, and scores them on the same test rows.
The table (frontier.md, frontier.json) gives per target: the shape, retention (student int8 test
accuracy / teacher PyTorch test accuracy) as mean ± sd over seeds, speed-up against the teacher in
PyTorch fp32 and against the teacher's O2 + int8 ONNX, the file size, and the difference in retention
to --compare-to (the teacher, or another point) with its paired bootstrap 95% interval over the test
rows (eval/stats.py: each row's share of a point's seeds that got it right, paired with the
reference's; "n.s." where the interval covers zero); frontier.png plots retention against speed-up.
--shapes adds students of shapes you name, measured in the same run (no target: their speed-up is
what that run measures), to compare, say, deep-narrow shapes with the picker's choice, or students
that are not transformers with those that are. --pick 0.2ms (or 50x) names, of every point measured,
the one that meets it with the highest mean retention, and its seed-0 int8 model to bundle. Artifacts already in the output folder are reused (--no-resume redoes them), and so is the
teacher's probe (teacher-probe.json), so that a re-run keeps the targets its students were made for.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from shrinkbert.api import run_stage
from shrinkbert.configs import FrontierConfig as Config
from shrinkbert.core.artifacts import artifact_hash, is_artifact, read_manifest, write_files
from shrinkbert.core.compact import PAIR_SWITCHES
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.data.dataspec import resolve_spec
from shrinkbert.core.device import torch_threads
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_of
from shrinkbert.core.models import check_model_dir, load_model
from shrinkbert.core.timing import time_callable
from shrinkbert.eval.rows import load_test_rows
from shrinkbert.eval.stats import compare_runs, difference_text, mean_sd


def parse_speedups(text: str) -> list[float]:
    values = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            value = float(part.lower().rstrip("x"))
        except ValueError:
            raise ShrinkbertError(f"speed-up targets look like 2x,4x,8x; got {part!r}") from None
        if value <= 1:
            raise ShrinkbertError(f"a speed-up target must be above 1x, got {part!r}")
        values.append(value)
    if not values:
        raise ShrinkbertError("no speed-up targets given (--speedups 2x,4x,8x)")
    return sorted(set(values))


SHAPE_TEXT = re.compile(r"(\d+)L/H(\d+)(?:/A(\d+))?(?:/[FI](\d+))?")
# a student that is not a transformer (core/compact): bilstm, cnn or bag, optionally /H (its width), /L (LSTM
# layers), /D (token-vector width) in any order; on a pair task /align (--cross-attention) and /compose
# (--composition)
COMPACT_TEXT = re.compile(r"(BILSTM|CNN|BAG)((?:/[HLD]\d+)*)(/ALIGN)?(/COMPOSE)?")
COMPACT_SIZES = {"H": "hidden", "L": "layers", "D": "token_dim"}


def parse_shapes(text: str) -> list[dict[str, Any]]:
    """'3L/H128,2L/H160/A5/F640' -> [{'layers': 3, 'hidden': 128}, {... 'heads': 5, 'intermediate': 640}];
    'bilstm/H150,bag' -> [{'student': 'bilstm', 'hidden': 150}, {'student': 'bag'}];
    'bilstm/H150/align/compose' -> [{'student': 'bilstm', 'hidden': 150, 'cross_attention': True, 'composition': True}]."""
    shapes: list[dict[str, Any]] = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        compact = COMPACT_TEXT.fullmatch(part.upper())
        sizes = re.findall(r"/([HLD])(\d+)", compact.group(2)) if compact else []
        if compact and len({letter for letter, _ in sizes}) == len(sizes):
            switches = dict(zip((key for key, _ in PAIR_SWITCHES), compact.groups()[2:]))
            shapes.append({"student": compact.group(1).lower(),
                           **{COMPACT_SIZES[letter]: int(value) for letter, value in sizes},
                           **{k: True for k, v in switches.items() if v}})
            continue
        match = SHAPE_TEXT.fullmatch(part.upper())
        if not match:
            raise ShrinkbertError(f"a student shape looks like 3L/H128 or 3L/H128/A4/F512, or bilstm/H150, cnn/H100, "
                                  f"bag (a pair task's bilstm/H150/align/compose); got {part!r}")
        values = dict(zip(("layers", "hidden", "heads", "intermediate"), match.groups()))
        shapes.append({k: int(v) for k, v in values.items() if v is not None})
    return shapes


def parse_cuts(text: str) -> list[dict[str, int]]:
    """'2L/H384/A6/F384' -> [{'layers': 2, 'hidden': 384, 'heads': 6, 'intermediate': 384}]: every field named."""
    cuts = parse_shapes(text)
    for cut in cuts:
        if "student" in cut or len(cut) < 4:
            raise ShrinkbertError(f"a cut names what it keeps, like 2L/H384/A6/F384; got {_shape_label(cut)!r}")
    return cuts


def _shape_label(shape: dict[str, Any]) -> str:
    if "student" in shape:  # a compact student: bilstm-H150-L1-D256(-align-compose), as given
        return "-".join([shape["student"]] + [f"{prefix}{shape[key]}" for key, prefix in
                                              (("hidden", "H"), ("layers", "L"), ("token_dim", "D")) if key in shape]
                        + [word for key, word in PAIR_SWITCHES if shape.get(key)])
    parts = [f"{shape['layers']}L"] + [f"{prefix}{shape[key]}" for key, prefix in
                                        (("hidden", "H"), ("heads", "A"), ("intermediate", "F")) if key in shape]
    return "-".join(parts)


def _log(message: str) -> None:
    print(f"frontier: {message}", file=sys.stderr, flush=True)


def probe_teacher_ms(teacher: str, max_length: int, threads: int) -> float:
    """The teacher's batch-1 p50 in PyTorch fp32 at max_length tokens: the speed-ups' reference."""
    import torch

    from shrinkbert.core.predict import encoder_inputs

    model = load_model(kind_of(teacher).model_class(), teacher).eval()  # the teacher's own head
    with torch_threads(threads), torch.inference_mode():
        ids = torch.full((1, max_length), 100 % model.config.vocab_size, dtype=torch.long)
        # the inputs its forward takes: MPNet, DistilBERT and ModernBERT take no token_type_ids
        inputs = encoder_inputs(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                        "token_type_ids": torch.zeros_like(ids)})
        return time_callable(lambda: model(**inputs), warmup=3, runs=15)["p50"]


def teacher_reference_ms(teacher: str, max_length: int, threads: int, out: Path, resume: bool) -> tuple[float, bool]:
    """The speed-up targets' reference, probed once per output folder and stored in teacher-probe.json:
    a re-run probes again only for another teacher, length or thread count (or --no-resume). Probing
    on every run would move the targets with the machine's noise, making every target's students stale
    and re-picking their shapes. Returns (p50 ms, whether it was reused)."""
    probe_file = out / "teacher-probe.json"
    key = {"teacher_hash": artifact_hash(teacher), "max_length": max_length, "threads": threads}
    if resume and probe_file.is_file():
        stored = json.loads(probe_file.read_text())
        if {k: stored.get(k) for k in key} == key:
            _log(f"teacher PyTorch fp32 p50 {stored['p50_ms']:.2f} ms, as probed when this folder was made "
                 f"({probe_file})")
            return float(stored["p50_ms"]), True
    teacher_ms = probe_teacher_ms(teacher, max_length, threads)
    write_files({probe_file: json.dumps({**key, "p50_ms": teacher_ms}, indent=2)})  # whole, or not at all
    _log(f"teacher PyTorch fp32 p50 {teacher_ms:.2f} ms (batch 1, seq {max_length}, {threads} threads)")
    return teacher_ms, False


# settings that change how fast an artifact is made, not what it holds: a difference does not make it stale
SPEED_ONLY = frozenset({"threads"})


def _stale_reason(out: Path, kwargs: dict[str, Any]) -> str:
    """Why the artifact in `out` was not made from these inputs ('' when it was): a parent artifact
    (the teacher, the model) whose content changed since, or a setting that differs."""
    manifest = read_manifest(out)
    for parent in manifest.get("parents", []):
        path = Path(parent.get("path", ""))
        if path.is_dir() and parent.get("hash") and artifact_hash(path) != parent["hash"]:
            return f"{path} changed since it was made"
    made_with = manifest.get("config", {})
    for key, value in kwargs.items():
        if key in SPEED_ONLY:
            continue
        if key in made_with and not (isinstance(value, str) and Path(value).exists()):  # paths: by hash above
            if made_with[key] != value:
                return f"{key} was {made_with[key]!r}, now {value!r}"
    return ""


def _stage(name: str, out: Path, resume: bool, **kwargs) -> Path:
    if resume and is_artifact(out):
        stale = _stale_reason(out, kwargs)
        if not stale:
            _log(f"reusing {out}")
            return out
        _log(f"remaking {out}: {stale}")
        shutil.rmtree(out)
    return Path(run_stage(name, output_dir=str(out), **kwargs).path)


def _int8(model: Path, where: Path, cfg: Config, resume: bool) -> Path:
    data = {"cache_dir": cfg.cache_dir} if cfg.cache_dir else {}
    onnx = _stage("export", where.with_name(where.name + "-onnx"), resume, model=str(model), optimization="O2",
                  max_length=cfg.max_length, threads=cfg.threads, **data)
    return _stage("quantize", where.with_name(where.name + "-int8"), resume, model=str(onnx), approach="dynamic",
                  max_length=cfg.max_length, threads=cfg.threads, max_eval_rows=min(cfg.max_eval_rows or 256, 256),
                  **data)


TRANSFORMER_ONLY = ("hidden_weight", "attention_weight", "init_embeddings")  # what a compact student has no use for


def _distill_kwargs(cfg: Config, compact: bool = False) -> dict[str, Any]:
    """The distill options every student of the frontier gets; a compact student (bilstm, cnn, bag) its own
    learning rate and none of the layer-to-layer ones."""
    keys = ("task", "text_column", "text_pair_column", "label_column", "split_seed", "cache_dir", "epochs",
            "max_steps", "batch_size", "learning_rate", "max_length", "max_train_rows", "max_eval_rows",
            "hidden_weight", "attention_weight", "init_embeddings", "mixed_precision", "augment", "transfer_corpus",
            "max_transfer_rows", "threads")
    values = {k: getattr(cfg, k) for k in keys if not (compact and k in TRANSFORMER_ONLY)}
    if compact:
        values["learning_rate"] = cfg.compact_learning_rate
    return {k: v for k, v in values.items() if v not in ("", None)}


def run(cfg: Config) -> Path:
    import os

    if not cfg.teacher:
        raise ShrinkbertError("no teacher given: --teacher DIR")
    check_model_dir(cfg.teacher)
    given = parse_shapes(cfg.shapes)
    cuts = parse_cuts(cfg.cuts)
    for cut in cuts:  # checked against the wide student's shape before anything is made
        _check_cut(cfg.teacher, cut)
    speedups = parse_speedups(cfg.speedups) if cfg.speedups.strip() or not (given or cuts) else []
    goal = parse_pick(cfg.pick) if cfg.pick.strip() else None
    threads = cfg.threads or os.cpu_count() or 1
    spec = resolve_spec(cfg, [cfg.teacher])
    # read the test rows now, before the output folder: a missing file or column leaves nothing behind
    load_test_rows(spec, split="test", max_rows=1, cache_dir=cfg.cache_dir or None)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    teacher_ms, probe_reused = teacher_reference_ms(cfg.teacher, cfg.max_length, threads, out, cfg.resume)
    teacher_int8 = _int8(Path(cfg.teacher), out / "teacher", cfg, cfg.resume)

    points: list[dict[str, Any]] = []
    for speedup in speedups:
        target_ms = teacher_ms / speedup
        point: dict[str, Any] = {"speedup_target": speedup, "target_ms": target_ms, "students": [], "shape": None}
        points.append(_distil_point(cfg, point, out / "students" / f"{speedup:g}x",
                                    {"target": f"{target_ms:.4f}ms", "latency_runtime": cfg.runtime}, probe_reused))
    for shape in given:
        point = {"speedup_target": None, "target_ms": None, "given": _shape_label(shape), "students": [],
                 "shape": None}
        points.append(_distil_point(cfg, point, out / "students" / _shape_label(shape), dict(shape)))
    for cut in cuts:
        point = {"speedup_target": None, "target_ms": None, "given": "cut-" + _shape_label(cut), "students": [],
                 "shape": None}
        points.append(_distil_cut(cfg, point, out / "students" / ("cut-" + _shape_label(cut)), cut))

    table = measure_frontier(cfg, spec, Path(cfg.teacher), teacher_int8, points, threads)
    table["teacher_probe_ms"] = teacher_ms
    if goal is not None:
        table["pick"] = pick_point(table, goal)
    table["config"] = to_dict(cfg)
    (out / "frontier.json").write_text(json.dumps(table, indent=2, default=str))
    (out / "frontier.md").write_text(format_table(table))
    plot_frontier(table, out / "frontier.png")
    print(format_table(table))
    _log(f"table written to {out / 'frontier.md'}, plot {out / 'frontier.png'}")
    return out


def _distil_point(cfg: Config, point: dict[str, Any], prefix: Path, shape_args: dict[str, Any],
                  same_targets: bool = False) -> dict[str, Any]:
    """Distil, export and quantize one point's students (seeds 0..N-1) into prefix-seed{N}.
    same_targets: the teacher probe was reused, so seeds already here were made for this very target."""
    name = point.get("given") or f"{point['speedup_target']:g}x"
    first = prefix.with_name(f"{prefix.name}-seed0")
    compact = "student" in shape_args
    lost_pick = same_targets and "target" in shape_args and not (
        is_artifact(first) and not _stale_reason(first, {**shape_args, **_distill_kwargs(cfg)}))
    picked = _shape_picked_before(prefix, cfg.seeds) if lost_pick else None
    if picked:  # seed 0 (the one that picks) is gone but another seed survives: keep its shape, do not re-pick
        _log(f"{name}: the shape picked before, {picked['layers']}L/H{picked['hidden']}")
        shape_args = picked
    for seed in range(cfg.seeds):
        where = prefix.with_name(f"{prefix.name}-seed{seed}")
        try:
            student = _stage("distill", where, cfg.resume, teacher=cfg.teacher, seed=seed, **shape_args,
                             **_distill_kwargs(cfg, compact))
        except ShrinkbertError as err:
            if "cannot be met" not in str(err):
                raise
            point["unmet"] = str(err).splitlines()[0]
            _log(f"{name}: {point['unmet']}")
            break
        shape = read_manifest(student)["student"]["shape"]
        if compact:  # its shape is the one given
            point["shape"] = {"student": shape_args["student"], **shape}
        elif point["shape"] is None:  # seed 0 picked it on the shipping runtime; the other seeds reuse it
            point["shape"] = shape
            shape_args = _shape_args(shape)
        point["students"].append({"seed": seed, "student": str(student),
                                  "int8": str(_int8(student, where, cfg, cfg.resume))})
    return point


def _distil_cut(cfg: Config, point: dict[str, Any], prefix: Path, cut: dict[str, int]) -> dict[str, Any]:
    """One cut point's students: per seed, a wide student (the cut's layers and width, the teacher's heads
    and FFN ratio), pruned to the cut's heads and FFN neurons per layer, then distilled again."""
    from transformers import AutoConfig

    from shrinkbert.students.shape import model_shape

    for seed in range(cfg.seeds):
        where = prefix.with_name(f"{prefix.name}-seed{seed}")
        wide = _stage("distill", where.with_name(where.name + "-wide"), cfg.resume, teacher=cfg.teacher, seed=seed,
                      layers=cut["layers"], hidden=cut["hidden"], **_distill_kwargs(cfg))
        wide_shape = read_manifest(wide)["student"]["shape"]
        cut_model = _stage("prune", where.with_name(where.name + "-pruned"), cfg.resume, model=str(wide),
                           head_fraction=1 - cut["heads"] / wide_shape["heads"],
                           neuron_fraction=1 - cut["intermediate"] / wide_shape["intermediate"],
                           head_scope="per_layer", max_length=cfg.max_length,
                           **({"cache_dir": cfg.cache_dir} if cfg.cache_dir else {}))
        student = _stage("distill", where, cfg.resume, teacher=cfg.teacher, seed=seed, student=str(cut_model),
                         **_distill_kwargs(cfg))
        point["shape"] = model_shape(AutoConfig.from_pretrained(student))
        point["students"].append({"seed": seed, "student": str(student),
                                  "int8": str(_int8(student, where, cfg, cfg.resume))})
    return point


def _check_cut(teacher: str, cut: dict[str, int]) -> None:
    """A cut only removes: its heads and FFN neurons must fit in the wide student it starts from."""
    from transformers import AutoConfig

    from shrinkbert.students.shape import resolve_explicit

    wide = dataclasses.asdict(resolve_explicit(AutoConfig.from_pretrained(teacher), layers=cut["layers"],
                                               hidden=cut["hidden"]))
    if cut["heads"] > wide["heads"] or cut["intermediate"] > wide["intermediate"]:
        raise ShrinkbertError(f"cut {_shape_text(cut)} keeps more than its wide student has "
                              f"({_shape_text(wide)}): a cut only removes heads and FFN neurons")


def _shape_picked_before(prefix: Path, seeds: int) -> dict[str, int] | None:
    """The shape of a target point's students already made against the same teacher, if any."""
    for seed in range(seeds):
        where = prefix.with_name(f"{prefix.name}-seed{seed}")
        if is_artifact(where) and not _stale_reason(where, {}):
            return _shape_args(read_manifest(where)["student"]["shape"])
    return None


def _shape_args(shape: dict) -> dict[str, int]:
    """The distill arguments that rebuild a student's recorded shape (its vocabulary comes from the teacher)."""
    return {k: shape[k] for k in ("layers", "hidden", "heads", "intermediate")}


def measure_frontier(cfg: Config, spec, teacher: Path, teacher_int8: Path, points: list[dict], threads: int) -> dict:
    """Time and score the teacher, its int8 export and every int8 student in one interleaved run."""
    from shrinkbert.eval.measure import Settings, measure
    from shrinkbert.eval.report import correctness

    rows = load_test_rows(spec, split="test", max_rows=cfg.max_eval_rows or None, cache_dir=cfg.cache_dir or None)
    settings = Settings(batch_sizes=[1], seq_lens=[str(cfg.max_length)], runs=cfg.runs, warmup=cfg.warmup,
                        threads=threads, max_length=cfg.max_length, memory="off")
    paths = [str(teacher), str(teacher_int8)] + [s["int8"] for p in points for s in p["students"]]
    variants = {v.path: v for v in measure(paths, rows, settings, progress=False)}
    case = settings.headline.label

    def figures(path: str) -> dict[str, Any]:
        variant = variants[path]
        if not variant.ok:
            raise ShrinkbertError(f"measuring {path} failed: {variant.error}")
        return {"accuracy": variant.accuracy["metrics"]["accuracy"], "p50_ms": variant.latency[case]["p50"],
                "size_bytes": variant.static["size_bytes"]}

    def outcomes(path: str) -> list[int] | None:
        """Right/wrong per test row (None when the measurement has none)."""
        found = correctness(variants[path], rows)
        return None if isinstance(found, str) else found[0]

    base, base_int8 = figures(str(teacher)), figures(str(teacher_int8))
    rows_out = []
    for point in points:
        measured = [{**s, **figures(s["int8"])} for s in point["students"]]
        row = {"speedup_target": point["speedup_target"], "target_ms": point["target_ms"], "shape": point["shape"],
               "given": point.get("given"),
               "seeds": len(measured), "unmet": point.get("unmet"), "students": measured}
        if measured:
            row["retention_mean"], row["retention_sd"] = mean_sd([m["accuracy"] / base["accuracy"] for m in measured])
            row["accuracy_mean"], row["accuracy_sd"] = mean_sd([m["accuracy"] for m in measured])
            row["speedup_vs_torch"], _ = mean_sd([base["p50_ms"] / m["p50_ms"] for m in measured])
            row["speedup_vs_teacher_int8"], _ = mean_sd([base_int8["p50_ms"] / m["p50_ms"] for m in measured])
            row["p50_ms"], _ = mean_sd([m["p50_ms"] for m in measured])
            row["size_mb"], _ = mean_sd([m["size_bytes"] / 1e6 for m in measured])
            row["x_smaller"] = base["size_bytes"] / 1e6 / row["size_mb"]
        row["outcomes"] = [outcomes(s["int8"]) for s in point["students"]]
        rows_out.append(row)
    add_paired_differences(rows_out, outcomes(str(teacher)), base["accuracy"], cfg.compare_to)
    for row in rows_out:
        del row["outcomes"]  # per-row outcomes served the intervals; frontier.json keeps the figures
    return {"test_rows": len(rows), "compare_to": cfg.compare_to, "threads": threads, "seq_len": cfg.max_length, "runtime": cfg.runtime,
            "teacher": {**base, "path": str(teacher)}, "teacher_int8": {**base_int8, "path": str(teacher_int8)},
            "points": rows_out}


def parse_pick(text: str):
    """--pick's goal: a batch-1 latency ('0.2ms') or a speed-up over the teacher ('50x')."""
    from shrinkbert.students.shape import parse_target

    goal = parse_target(text)
    if goal.kind not in ("ms", "speedup"):
        raise ShrinkbertError(f"--pick {text!r}: give a batch-1 latency ('0.2ms') or a speed-up over the teacher "
                              "in PyTorch fp32 ('50x')")
    return goal


def pick_point(table: dict, goal) -> dict[str, Any]:
    """Of the measured points, the one that meets `goal` (p50 at most its ms, or a speed-up over the teacher
    in PyTorch fp32 of at least its x) with the highest mean retention (the faster of equals); where none
    meets it, the fastest point instead, marked unmet."""
    def meets(row: dict) -> bool:
        return row["p50_ms"] <= goal.value if goal.kind == "ms" else row["speedup_vs_torch"] >= goal.value

    measured = [row for row in table["points"] if row["seeds"]]
    if not measured:
        return {"goal": goal.text, "met": False, "point": None}
    meeting = [row for row in measured if meets(row)]
    best = (max(meeting, key=lambda row: (row["retention_mean"], -row["p50_ms"])) if meeting
            else min(measured, key=lambda row: row["p50_ms"]))
    return {"goal": goal.text, "met": bool(meeting), "point": point_label(best), "shape": _shape_text(best["shape"]),
            "retention_mean": best["retention_mean"], "retention_sd": best["retention_sd"],
            "p50_ms": best["p50_ms"], "speedup_vs_torch": best["speedup_vs_torch"],
            "int8": best["students"][0]["int8"]}


def pick_text(pick: dict) -> str:
    """The table's line for --pick."""
    if pick["point"] is None:
        return f"Pick for {pick['goal']}: no point was measured."
    figures = (f"{pick['shape']}, {pick['retention_mean']:.1%} ± {pick['retention_sd']:.1%} retention at "
               f"{pick['p50_ms']:.3f} ms ({pick['speedup_vs_torch']:.1f}x)")
    if not pick["met"]:
        return f"Pick for {pick['goal']}: no point meets it; the fastest is {figures}."
    return (f"Pick for {pick['goal']}: {figures}; to ship its seed-0 int8 model: "
            f"`shrinkbert bundle --model {pick['int8']}`.")


def point_label(row: dict) -> str:
    """How --compare-to names a point: its target (15x) or its given shape (2L-H160)."""
    return row.get("given") or f"{row['speedup_target']:g}x"


def add_paired_differences(rows_out: list[dict], teacher_outcomes: list[int] | None, teacher_accuracy: float,
                           compare_to: str) -> None:
    """Each point's retention minus the reference's (in retention points: accuracy / the teacher's),
    with the paired bootstrap 95% interval over the test rows, as row["vs_reference"]."""
    labels = {point_label(row): row for row in rows_out}
    if compare_to in ("", "teacher"):
        reference, name = [teacher_outcomes], "teacher"
    elif compare_to in labels:
        reference, name = labels[compare_to]["outcomes"], compare_to
    else:
        raise ShrinkbertError(f"--compare-to {compare_to!r} names no point of this frontier "
                              f"(teacher, {', '.join(labels)})")
    for row in rows_out:
        runs = row["outcomes"]
        row.pop("vs_reference", None)
        if not runs or not reference or row is labels.get(name) or any(r is None for r in runs + reference):
            continue
        diff = compare_runs(runs, reference)
        row["vs_reference"] = {"vs": name, **{k: v / teacher_accuracy for k, v in
                                              (("difference", diff.difference), ("low", diff.low),
                                               ("high", diff.high))},
                               "significant": diff.significant, "rows": diff.n, "resamples": diff.resamples}


def _shape_text(shape: dict | None) -> str:
    if not shape:
        return "-"
    if "student" in shape:  # a compact student: its width, LSTM layers and token-vector width
        layers = f"x{shape['num_hidden_layers']}" if shape.get("num_hidden_layers", 1) > 1 else ""
        switches = "".join(f"/{word}" for key, word in PAIR_SWITCHES if shape.get(key))
        return f"{shape['student']}{layers}/H{shape['hidden_size']}/D{shape['embedding_dim']}{switches}"
    per_layer = shape.get("heads_per_layer")  # a pruned model whose layers kept different head counts
    heads = f"{min(per_layer)}-{max(per_layer)}" if per_layer else shape["heads"]
    return f"{shape['layers']}L/H{shape['hidden']}/A{heads}/F{shape['intermediate']}"


def _target_text(row: dict) -> str:
    if row.get("speedup_target") is not None:
        return f"{row['speedup_target']:g}x"
    return "cut" if str(row.get("given", "")).startswith("cut-") else "shape given"


def format_table(table: dict) -> str:
    t, ti = table["teacher"], table["teacher_int8"]
    lines = [f"Frontier: O2 + int8 ONNX students, shapes picked on {table['runtime']}, {table['test_rows']} test rows, "
             f"batch 1, seq {table['seq_len']}, {table['threads']} threads, one interleaved run",
             "",
             "| target | shape | seeds | retention (mean ± sd) | test acc | p50 ms | speed-up vs teacher PyTorch fp32 "
             f"| vs teacher O2+int8 ONNX | size MB | x smaller | retention vs {table.get('compare_to') or 'teacher'} "
             "[95% CI] |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
             f"| teacher (PyTorch fp32) | | | 100.0% | {t['accuracy']:.4f} | {t['p50_ms']:.2f} | 1.00x | "
             f"{ti['p50_ms'] / t['p50_ms']:.2f}x | {t['size_bytes'] / 1e6:.1f} | 1.0x | |",
             f"| teacher O2+int8 ONNX | | | {ti['accuracy'] / t['accuracy']:.1%} | {ti['accuracy']:.4f} | "
             f"{ti['p50_ms']:.2f} | {t['p50_ms'] / ti['p50_ms']:.2f}x | 1.00x | {ti['size_bytes'] / 1e6:.1f} | "
             f"{t['size_bytes'] / ti['size_bytes']:.1f}x | |"]
    for row in table["points"]:
        if not row["seeds"]:
            lines.append(f"| {_target_text(row)} | unmet | 0 | | | | | | | | |")
            continue
        lines.append(f"| {_target_text(row)} | {_shape_text(row['shape'])} | {row['seeds']} | "
                     f"{row['retention_mean']:.1%} ± {row['retention_sd']:.1%} | {row['accuracy_mean']:.4f} | "
                     f"{row['p50_ms']:.2f} | {row['speedup_vs_torch']:.2f}x | {row['speedup_vs_teacher_int8']:.2f}x | "
                     f"{row['size_mb']:.2f} | {row['x_smaller']:.1f}x | {difference_text(row.get('vs_reference'))} |")
    if table.get("pick"):
        lines += ["", pick_text(table["pick"])]
    lines += ["", "Retention vs the reference: the difference in retention points (a point's test accuracy "
                  "averaged over its seeds, minus the reference's, over the teacher's) with a paired bootstrap "
                  "95% interval over the test rows; n.s. = the interval covers zero. The seeds' own spread is "
                  "the ± sd beside it."]
    return "\n".join(lines) + "\n"


def plot_frontier(table: dict, path: Path) -> None:
    """frontier.png: retention against speed-up, the line through the Pareto points only (eval/plot.py)."""
    from shrinkbert.eval.plot import frontier_plot

    frontier_plot(table, path)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    raise SystemExit(main())
