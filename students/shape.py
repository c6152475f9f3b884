"""Student shape from a target: a share of the teacher's parameters, a file size, or a latency.

    --target 25%     at most 25% of the teacher's parameters
    --target 20MB    fp32 weights file of at most 20 MB (1 MB = 10^6 bytes; MiB also accepted)
    --target 4ms     batch-1 p50 latency at `seq_len` tokens on this machine, threads stated
    --target 10x     a tenth of the teacher's own batch-1 p50 there: the teacher is timed once, the
                     same way, and the target becomes a latency target (teacher ms / 10)

Explicit fields (layers, hidden, heads, intermediate) may be given with or without a target: with
no target they are the shape (unset ones default to the teacher's); with a target they pin that
dimension and the picker chooses the rest.

The rule that picks among shapes that fit (a capacity prior, not a measurement of accuracy):
prefer the largest layers x hidden^2 (about the encoder's weights; see `Shape.prior`); on a tie,
the wider model (hidden), then the wider FFN. Head
size stays the teacher's (heads = hidden / teacher head size) so the student's heads are whole
teacher heads, and the FFN keeps the teacher's FFN/hidden ratio. Layers never exceed the
teacher's, so every student layer can start from a teacher layer.

Parameter counts are computed analytically for the BERT layout (no model is built), which makes a
search over hundreds of shapes instant; tests check the formula against real models. A family whose
students keep the teacher's widths (core/families) is searched over layers only.
"""
from __future__ import annotations

import copy

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable

from shrinkbert.compress.int8 import choose
from shrinkbert.core.device import torch_threads
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import Widths, family_of
from shrinkbert.core.quiet import quiet_library_warnings

BYTES_PER_MB = 1_000_000
BYTES_PER_MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Shape(Widths):
    """A student's widths (core/families' Widths) with the picker's prior and its short name."""

    def __str__(self) -> str:
        return f"{self.layers}L/H{self.hidden}/A{self.heads}/I{self.intermediate}"

    @property
    def prior(self) -> tuple[int, int, int]:
        """The capacity prior: bigger is preferred (layers x hidden^2, about the encoder's weights, then
        hidden, then FFN). Width counts squared because, at equal budget, a wider shallower student
        distils better and runs faster than a deeper narrower one (`shrinkbert frontier --shapes`
        compares shapes on accuracy and speed)."""
        return (self.layers * self.hidden * self.hidden, self.hidden, self.intermediate)


@dataclasses.dataclass(frozen=True)
class Target:
    kind: str  # "fraction" | "bytes" | "ms" | "speedup"
    value: float
    text: str


def parse_target(text: str) -> Target:
    """'25%' -> fraction 0.25; '20MB'/'20MiB'/'1.5GB' -> bytes; '4ms' -> ms; '10x' -> speedup 10.

    Raises:
        ShrinkbertError: text that is none of these, not positive, over 100%, or a speed-up of 1x or less.
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%|[kKmMgG]i?[bB]|ms|[xX])\s*", str(text))
    if not match:
        raise ShrinkbertError(f"target {text!r} not understood: give a share of the teacher ('25%'), "
                              "a file size ('20MB'), a batch-1 latency ('4ms') or a speed-up over the teacher ('10x')")
    number, unit = float(match.group(1)), match.group(2)
    if number <= 0:
        raise ShrinkbertError(f"target {text!r} must be positive")
    if unit in "xX":
        if number <= 1:
            raise ShrinkbertError(f"target {text!r}: a speed-up over the teacher must be above 1x")
        return Target("speedup", number, text)
    if unit == "%":
        if number > 100:
            raise ShrinkbertError(f"target {text!r} is more than the whole teacher")
        return Target("fraction", number / 100.0, text)
    if unit == "ms":
        return Target("ms", number, text)
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}[unit[0].lower()]
    if "i" in unit.lower():
        scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit[0].lower()]
    return Target("bytes", number * scale, text)


def count_config_parameters(config, *, head: str = "classifier") -> int:
    """Parameters of a model with `config`. head: classifier | mlm | none.

    For the BERT layout (BERT, RoBERTa, ELECTRA embedding at full width) analytically, so a search over
    hundreds of shapes is instant: classifier = BertForSequenceClassification (with pooler; RoBERTa's
    and ELECTRA's two-layer heads count the same); mlm = BertForMaskedLM (no pooler, decoder tied to
    the word embeddings, so only its bias counts); none = BertModel with pooler. Counts
    config.pruned_heads (whole heads removed per layer) too. Other families are built on the meta
    device and counted (their students vary only in layers, a dozen shapes).
    """
    if not family_of(config).counts_like_bert or getattr(config, "embedding_size", config.hidden_size) != config.hidden_size:
        return _built_parameters(config, head)
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    head_dim = h // config.num_attention_heads
    params = (v + config.max_position_embeddings + config.type_vocab_size) * h + 2 * h  # + LayerNorm
    pruned = {int(k): len(v_) for k, v_ in (getattr(config, "pruned_heads", None) or {}).items()}
    for layer in range(config.num_hidden_layers):
        a = (config.num_attention_heads - pruned.get(layer, 0)) * head_dim  # attention inner width
        params += 3 * (h * a + a) + (a * h + h) + 2 * h  # q, k, v; output dense; LayerNorm
        params += (h * i + i) + (i * h + h) + 2 * h  # FFN in, FFN out, LayerNorm
    if head == "classifier":
        params += h * h + h + h * config.num_labels + config.num_labels
    elif head == "mlm":
        params += h * h + h + 2 * h + v  # transform dense, LayerNorm, decoder bias
    elif head == "none":
        params += h * h + h
    else:
        raise ValueError(f"unknown head {head!r}")
    return params


def _built_parameters(config, head: str) -> int:
    import torch
    import transformers

    auto = {"classifier": "AutoModelForSequenceClassification", "mlm": "AutoModelForMaskedLM", "none": "AutoModel"}
    if head not in auto:
        raise ValueError(f"unknown head {head!r}")
    with torch.device("meta"):
        model = getattr(transformers, auto[head]).from_config(config)
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once


def fp32_bytes(num_parameters: int) -> int:
    """Size of a model.safetensors holding num_parameters fp32 values (the small header ignored)."""
    return 4 * num_parameters


def shape_config(teacher_config, shape: Shape):
    """A config of the teacher's family (vocab, positions, labels, ...) with the student's shape."""
    return family_of(teacher_config).student_config(teacher_config, shape)


def teacher_shape(config) -> Shape:
    return Shape(**dataclasses.asdict(family_of(config).widths(config)))


def model_shape(config) -> dict:
    """A model's shape as a manifest records it: heads are the heads a structured prune left (config
    keeps the original count and lists the removed ones), with `heads_per_layer` where layers differ."""
    shape = dataclasses.asdict(teacher_shape(config))
    removed = {int(layer): len(heads) for layer, heads in (getattr(config, "pruned_heads", None) or {}).items()}
    kept = [config.num_attention_heads - removed.get(layer, 0) for layer in range(config.num_hidden_layers)]
    if len(set(kept)) == 1:
        shape["heads"] = kept[0]
    else:
        shape["heads_per_layer"] = kept
    return shape


def _head_dim(teacher_config) -> int:
    teacher = teacher_shape(teacher_config)
    return teacher.hidden // teacher.heads


def candidate_shapes(teacher_config, *, layers: int | None = None, hidden: int | None = None,
                     heads: int | None = None, intermediate: int | None = None,
                     hidden_steps: list[int] | None = None, ffn_fractions: tuple[float, ...] = (1.0,)) -> list[Shape]:
    """Every shape the picker considers: layers 1..teacher's, hidden in steps of the teacher's
    head size up to the teacher's width, FFN at the teacher's FFN/hidden ratio times each of
    `ffn_fractions`; fixed dimensions (not None) pinned."""
    teacher = teacher_shape(teacher_config)
    if not family_of(teacher_config).slices_width:  # a student from the teacher keeps its widths
        hidden, heads, intermediate = hidden or teacher.hidden, heads or teacher.heads, intermediate or teacher.intermediate
    head_dim = _head_dim(teacher_config)
    ffn_ratio = teacher.intermediate / teacher.hidden
    layer_options = [layers] if layers else list(range(1, teacher.layers + 1))
    if hidden:
        hidden_options = [hidden]
    else:
        hidden_options = hidden_steps or list(range(head_dim, teacher_config.hidden_size + 1, head_dim))
    shapes = []
    for n_layers in layer_options:
        for width in hidden_options:
            n_heads = heads or max(1, width // head_dim)
            if width % n_heads:
                continue
            ffns = [intermediate] if intermediate else sorted({max(1, int(round(width * ffn_ratio * fraction)))
                                                                for fraction in ffn_fractions})
            shapes.extend(Shape(n_layers, width, n_heads, ffn) for ffn in ffns)
    return shapes


def resolve_explicit(teacher_config, *, layers=None, hidden=None, heads=None, intermediate=None) -> Shape:
    """An explicit shape; unset fields follow the teacher (heads keep its head size, FFN its ratio)."""
    teacher = teacher_shape(teacher_config)
    hidden = hidden or teacher.hidden
    if heads is None:
        heads = teacher.heads if hidden == teacher.hidden else max(1, hidden // _head_dim(teacher_config))
    if intermediate is None:
        intermediate = (teacher.intermediate if hidden == teacher.hidden
                        else int(round(hidden * teacher.intermediate / teacher.hidden)))
    shape = Shape(layers or teacher.layers, hidden, heads, intermediate)
    validate_shape(shape)
    return shape


def validate_shape(shape: Shape) -> None:
    for name in ("layers", "hidden", "heads", "intermediate"):
        if getattr(shape, name) < 1:
            raise ShrinkbertError(f"student {name} must be at least 1, got {getattr(shape, name)}")
    if shape.hidden % shape.heads:
        raise ShrinkbertError(f"student hidden size {shape.hidden} is not a multiple of its "
                              f"{shape.heads} attention heads")


def _pick(fitting: list[Shape]) -> Shape:
    return max(fitting, key=lambda s: s.prior)


def pick_by_size(teacher_config, target: Target, *, head: str = "classifier", **fixed) -> tuple[Shape, list[dict]]:
    """The preferred shape whose parameter count (fraction) or fp32 size (bytes) fits the target."""
    teacher_params = count_config_parameters(teacher_config, head=head)
    limit = (target.value * teacher_params if target.kind == "fraction" else target.value / 4.0)
    rows, fitting = [], []
    for shape in candidate_shapes(teacher_config, **fixed):
        params = count_config_parameters(shape_config(teacher_config, shape), head=head)
        fits = params <= limit
        rows.append({"shape": str(shape), "params": params, "MB": fp32_bytes(params) / BYTES_PER_MB,
                     "share": params / teacher_params, "fits": fits})
        if fits:
            fitting.append(shape)
    if not fitting:
        smallest = min(rows, key=lambda r: r["params"]) if rows else None
        what = (f"{target.value:.1%} of the teacher's {teacher_params:,} parameters"
                if target.kind == "fraction" else f"{target.value / BYTES_PER_MB:.2f} MB")
        pinned = ", ".join(f"{k}={v}" for k, v in fixed.items() if v)
        raise ShrinkbertError(
            f"target {target.text} ({what}) cannot be met: the smallest possible student"
            f"{' with ' + pinned if pinned else ''} ({smallest['shape']}) has {smallest['params']:,} parameters "
            f"({smallest['share']:.1%} of the teacher, {smallest['MB']:.2f} MB), most of it the embeddings"
            if smallest else f"target {target.text} cannot be met: no candidate shapes")
    return _pick(fitting), rows


RUNTIMES = ("torch", "onnx", "onnx-int8")
LATENCY_FFN_FRACTIONS = (1.0, 0.5)  # of the teacher's FFN/hidden ratio, for latency targets


@quiet_library_warnings(tracing=True)
def _export(model, ids, path: Path) -> Path:
    import torch

    mask = torch.ones_like(ids)
    with torch.inference_mode():
        torch.onnx.export(model, (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})
    return path


def _timing_model(config):
    """A random-init classifier of this shape for timing (small vocabulary: a lookup costs the same)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    config = copy.deepcopy(config)
    special_ids = [getattr(config, name, None) for name in ("pad_token_id", "bos_token_id", "eos_token_id",
                                                             "cls_token_id", "sep_token_id")]
    config.vocab_size = max([1000] + [i + 1 for i in special_ids if isinstance(i, int)])  # the timing ids lie below 1000
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config).eval()


def _interleaved_p50(run: Callable[[], object], run_neighbour: Callable[[], object], warmup: int, runs: int) -> float:
    """p50 ms of `run`, each call (warm-up included) preceded by an untimed `run_neighbour`."""
    import time

    import numpy as np

    samples = []
    for i in range(warmup + runs):
        run_neighbour()
        start = time.perf_counter()
        run()
        if i >= warmup:
            samples.append(1000 * (time.perf_counter() - start))
    return float(np.median(samples))


def torch_timer(warmup: int, runs: int, neighbour_config=None) -> Callable:
    """A timer(model, ids) -> p50 ms in PyTorch fp32, interleaved like onnx_timer: with
    `neighbour_config` (the teacher's), a random-init model of that shape runs before every timed
    call, so the candidate pays the cache and thread wake-ups it will pay in the report."""
    import torch

    neighbour: dict[str, Any] = {}

    def run_neighbour(ids) -> None:
        if neighbour_config is None:
            return
        if "model" not in neighbour:  # built once, kept for the timer's life
            neighbour["model"] = _timing_model(neighbour_config)
        neighbour["model"](input_ids=ids)

    def timer(model, ids) -> float:
        with torch.inference_mode():
            return _interleaved_p50(lambda: model(input_ids=ids), lambda: run_neighbour(ids), warmup, runs)
    return timer


def onnx_timer(runtime: str, threads: int, warmup: int, runs: int, neighbour_config=None) -> Callable:
    """A timer(model, ids) -> p50 ms that exports the model to ONNX (TorchScript exporter, as
    compress.export's Optimum path does), int8-quantizes it for 'onnx-int8' with the CPU's own
    defaults (compress.int8.choose: per-channel, reduce_range on x86 without VNNI), and times it in
    ONNX Runtime with `threads` intra-op threads, no spinning: the runtime the student ships in.

    Timed the way the report times (eval/latency.py): interleaved. The report runs every variant in
    turn, so each call of one follows calls of the others, with their caches and thread wake-ups;
    timed back to back, a small model reads much faster than the report will find it. With `neighbour_config` (the
    teacher's), a model of that shape in fp32 ONNX runs before every timed call."""
    import tempfile

    import numpy as np
    import torch

    from shrinkbert.compress.common import ort_session

    neighbour: dict[str, Any] = {}

    def run_neighbour(ids) -> None:
        if neighbour_config is None:
            return
        if "run" not in neighbour:  # built once, kept for the timer's life
            neighbour["dir"] = tempfile.TemporaryDirectory()
            path = _export(_timing_model(neighbour_config), ids, Path(neighbour["dir"].name) / "n.onnx")
            session = ort_session(path, threads)
            feed = {"input_ids": ids.numpy().astype(np.int64), "attention_mask": np.ones(ids.shape, np.int64)}
            neighbour["run"] = lambda: session.run(None, feed)
        neighbour["run"]()

    def timer(model, ids) -> float:
        with tempfile.TemporaryDirectory() as work:
            path = _export(model, ids, Path(work) / "model.onnx")
            mask = torch.ones_like(ids)
            if runtime == "onnx-int8":
                from onnxruntime.quantization import QuantType, quantize_dynamic

                choice = choose("auto")
                quantize_dynamic(str(path), str(Path(work) / "int8.onnx"), per_channel=choice["per_channel"],
                                 reduce_range=choice["reduce_range"],
                                 weight_type=QuantType.QInt8 if choice["weight_type"] == "s8" else QuantType.QUInt8)
                path = Path(work) / "int8.onnx"
            session = ort_session(path, threads)
            feed = {"input_ids": ids.numpy().astype(np.int64), "attention_mask": mask.numpy().astype(np.int64)}
            return _interleaved_p50(lambda: session.run(None, feed), lambda: run_neighbour(ids), warmup, runs)
    return timer


def latency_timer(teacher_config, runtime: str, threads: int, warmup: int, runs: int) -> Callable:
    """The timer a latency target's candidates (and, for a speed-up target, the teacher) are timed
    with: on `runtime`, interleaved with a teacher-sized model, as the report times."""
    if runtime == "torch":
        return torch_timer(warmup, runs, neighbour_config=teacher_config)
    return onnx_timer(runtime, threads, warmup, runs, neighbour_config=teacher_config)


def teacher_latency_ms(teacher_config, *, seq_len: int = 128, threads: int | None = None, runs: int = 10,
                       warmup: int = 2, runtime: str = "torch") -> float:
    """The teacher's own batch-1 p50 ms at `seq_len` tokens on `runtime`, timed as pick_by_latency
    times its candidates (a random-init model of the teacher's shape, the same timer and threads):
    the reference a speed-up target ('10x') divides. torch's thread count is left as found."""
    import torch

    if runtime not in RUNTIMES:
        raise ShrinkbertError(f"latency runtime must be one of {', '.join(RUNTIMES)}, got '{runtime}'")
    with torch_threads(threads) as threads_used:
        timer = latency_timer(teacher_config, runtime, threads_used, warmup, runs)
        ids = torch.randint(0, 1000, (1, min(seq_len, teacher_config.max_position_embeddings)))
        model = _timing_model(teacher_config)
        with torch.inference_mode():
            return float(timer(model, ids))


def pick_by_latency(teacher_config, target: Target, *, seq_len: int = 128, threads: int | None = None,
                    runs: int = 10, warmup: int = 2, hidden_steps: list[int] | None = None,
                    timer: Callable | None = None, log: Callable[[str], None] = print,
                    runtime: str = "torch", **fixed) -> tuple[Shape, list[dict]]:
    """Time random-init BERTs of a small grid of shapes at batch 1 and pick the preferred that fits.

    Grid: hidden in quarters of the teacher's width (rounded to whole heads), layers 1..teacher's,
    FFN at the teacher's ratio and at half of it. Latency grows with layers at a fixed width, so once
    a shape misses the target the deeper ones at that width and FFN are skipped untimed. The
    vocabulary size does not change latency (a lookup), so candidates are built with a small
    vocabulary to build fast.

    runtime: where the student ships and is timed: torch (PyTorch fp32 in-process), onnx (fp32 ONNX
    Runtime) or onnx-int8 (dynamic int8 with this CPU's defaults, ONNX Runtime). torch's global
    thread count is left as it was found.
    """
    if runtime not in RUNTIMES:
        raise ShrinkbertError(f"latency runtime must be one of {', '.join(RUNTIMES)}, got '{runtime}'")
    with torch_threads(threads) as threads_used:
        return _pick_by_latency(teacher_config, target, seq_len=seq_len, threads=threads_used, runs=runs, warmup=warmup,
                                hidden_steps=hidden_steps, timer=timer, log=log, runtime=runtime, **fixed)


def _pick_by_latency(teacher_config, target: Target, *, seq_len, threads, runs, warmup, hidden_steps, timer, log,
                     runtime, **fixed) -> tuple[Shape, list[dict]]:
    import torch

    head_dim = _head_dim(teacher_config)
    if hidden_steps is None and not fixed.get("hidden"):
        quarters = {max(head_dim, int(round(teacher_config.hidden_size * q / 4 / head_dim)) * head_dim)
                    for q in (1, 2, 3, 4)}
        hidden_steps = sorted(quarters)
    # Half-width FFNs too: at the same latency, a deeper student with half the FFN can keep more of the
    # teacher than a shallower one with the full FFN (the frontier compares such shapes).
    shapes = candidate_shapes(teacher_config, hidden_steps=hidden_steps, ffn_fractions=LATENCY_FFN_FRACTIONS, **fixed)
    timer = timer or latency_timer(teacher_config, runtime, threads, warmup, runs)
    seq_len = min(seq_len, teacher_config.max_position_embeddings)
    ids = torch.randint(0, 1000, (1, seq_len))
    rows, fitting, too_slow = [], [], set()
    for shape in sorted(shapes, key=lambda s: (s.hidden, s.intermediate, s.layers)):
        key = (shape.hidden, shape.heads, shape.intermediate)
        params = count_config_parameters(shape_config(teacher_config, shape))
        row = {"shape": str(shape), "params": params, "MB": fp32_bytes(params) / BYTES_PER_MB}
        if key in too_slow:
            row.update(p50_ms=None, fits=False)
        else:
            model = _timing_model(shape_config(teacher_config, shape))
            with torch.inference_mode():
                p50 = float(timer(model, ids))
            row.update(p50_ms=p50, fits=p50 <= target.value)
            if row["fits"]:
                fitting.append(shape)
            else:
                too_slow.add(key)
        rows.append(row)
    log(format_table(rows, f"candidates for {target.text} at batch 1, seq {seq_len}, {runtime}, {threads} threads "
                           "(p50 ms; '-' = skipped, a shallower one at this width was already too slow)"))
    if not fitting:
        fastest = min((r for r in rows if r["p50_ms"] is not None), key=lambda r: r["p50_ms"])
        raise ShrinkbertError(f"target {target.text} cannot be met at seq {seq_len} on {runtime} with {threads} threads: "
                              f"the fastest candidate ({fastest['shape']}) takes {fastest['p50_ms']:.2f} ms")
    return _pick(fitting), rows


def format_table(rows: list[dict], title: str = "") -> str:
    if not rows:
        return title
    columns = list(rows[0])

    def cell(value):
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.3f}" if value < 10 else f"{value:.1f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    table = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(columns)]
    lines = [title] if title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(t, widths)) for t in table)
    return "\n".join(lines)


def choose_shape(teacher_config, *, target: str | None = None, layers: int | None = None,
                 hidden: int | None = None, heads: int | None = None, intermediate: int | None = None,
                 seq_len: int = 128, threads: int | None = None, head: str = "classifier",
                 log: Callable[[str], None] = print, runtime: str = "torch") -> tuple[Shape, dict]:
    """The student shape from a target and/or explicit fields; returns (shape, record for the manifest)."""
    fixed = {"layers": layers, "hidden": hidden, "heads": heads, "intermediate": intermediate}
    if layers and layers > teacher_config.num_hidden_layers:
        raise ShrinkbertError(f"a student initialised from the teacher has at most its "
                              f"{teacher_config.num_hidden_layers} layers, not {layers}")
    if not target:
        shape = resolve_explicit(teacher_config, **fixed)
        record = {"how": "explicit"}
    else:
        parsed = parse_target(target)
        speedup = {}
        if parsed.kind == "speedup":  # the teacher timed once, as the candidates are: a latency target
            teacher_ms = teacher_latency_ms(teacher_config, seq_len=seq_len, threads=threads, runtime=runtime)
            limit = teacher_ms / parsed.value
            log(f"target {target}: the teacher takes {teacher_ms:.2f} ms at batch 1, seq {seq_len} on {runtime}; "
                f"a student of at most {limit:.2f} ms")
            speedup = {"speedup": target, "teacher_ms": teacher_ms}
            parsed = Target("ms", limit, f"{limit:.4f}ms")
        if parsed.kind == "ms":
            shape, rows = pick_by_latency(teacher_config, parsed, seq_len=seq_len, threads=threads, log=log,
                                          runtime=runtime, **fixed)
        else:
            shape, rows = pick_by_size(teacher_config, parsed, head=head, **fixed)
            fitting_rows = sorted((r for r in rows if r["fits"]), key=lambda r: -r["params"])
            log(format_table(fitting_rows[:10], f"{len(fitting_rows)} of {len(rows)} candidate shapes fit "
                                                f"{target}; the 10 largest:"))
        # "target" is what the student is judged by (eval/targets.py): a speed-up's resolved latency
        record = {"how": f"target {target}", "target": parsed.text, **speedup,
                  "rule": "max layers*hidden, then hidden, then FFN",
                  "latency_runtime": runtime if parsed.kind == "ms" else None,
                  "candidates": rows}
        validate_shape(shape)
    params = count_config_parameters(shape_config(teacher_config, shape), head=head)
    teacher_params = count_config_parameters(teacher_config, head=head)
    log(f"student shape: {shape}  ({params:,} parameters, {params / teacher_params:.1%} of the teacher, "
        f"{fp32_bytes(params) / BYTES_PER_MB:.1f} MB fp32)")
    record.update(shape=dataclasses.asdict(shape), num_parameters=params, teacher_parameters=teacher_params)
    return shape, record
