"""The logits objective: task distillation. The student learns the teacher's softened logits on the task's
labelled rows (and, with their weights, hidden states, attention maps, embedding outputs and the gold labels).

    shrinkbert distill --teacher runs/teacher --task movie-snippets --target 25%
    shrinkbert distill --teacher T --task data.csv --layers 4 --hidden 192 --hidden-weight 1

- Reads from the teacher: its logits on the training rows (cached once per teacher, tokenized data and
  max_length: students/cache.py; the teacher is not even loaded on a cache hit), and the hidden states
  and attention maps of the mapped layers when their losses are on (cached too, fp16, real tokens only;
  `--no-cache-hidden` or `--no-cache` run the teacher live for them).
- Loss terms (students/losses.py, each with its weight, 0 = off): soft-logit KD (KL, T^2-scaled),
  hidden-state MSE (through a learned projection when the widths differ), attention transfer,
  embedding-output MSE, hard-label cross-entropy. Token tasks compare the labelled words' first
  sub-tokens; transfer sets (--augment, --transfer-corpus) are for sequence tasks.
- Hands the trainer (core/train.py): the student, the tokenized rows, their collate and the loss mix;
  the learned projections train beside the student and are not saved (the manifest says so).

The saved student is a plain model of the teacher's family (or of the pretrained student's: --student)
that its task kind's AutoModelFor... class loads with no custom code. `--student bilstm`, `cnn` or `bag`
makes a student that is not a transformer (core/compact/: a BiLSTM, a CNN over token embeddings, a bag
of token vectors, each with an MLP head) over the teacher's tokens, its token vectors the teacher's input
embeddings reduced by PCA (students/compact_init.py); it learns the teacher's logits (and the gold labels),
best on a large teacher-labelled transfer set (--augment, --transfer-corpus).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from shrinkbert.core.compact import ARCHITECTURES as COMPACT_STUDENTS, is_compact_folder
from shrinkbert.core.config import field
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.students.objectives.common import HiddenLossOptions, ShapeOptions, StudentOptions

KERNEL_SIZES = "3,4,5"  # --kernel-sizes' default: Kim's filter widths
PROJECTIONS_NOTE = ("hidden/embedding losses used learned projections from the student's width to the "
                    "teacher's; they are training-only and were not saved (the student never uses them)")


@dataclass
class LayerOptions(ShapeOptions, HiddenLossOptions):
    """A transformer student taught layer by layer from a transformer teacher (logits, masked-lm)."""
    init: str = field("teacher", "teacher: start from (sliced) teacher weights | random", choices=("teacher", "random"), group="student shape")
    init_layers: str = field("", "teacher layers (1-based) the student layers start from, e.g. 2,4,6 (default: uniform)", group="student shape")
    init_embeddings: str = field("auto", "the student's residual stream from the teacher's: auto (pca for a student "
                                         "narrower than its teacher, where it keeps more of the teacher (bench/plateau.py), "
                                         "columns otherwise) | columns (the dims --init-keep picks) | pca (the "
                                         "top principal components of the teacher's embedding table) | projected (pca, "
                                         "then the teacher's table through a learned projection, folded into a plain "
                                         "table when saved)",
                                 choices=("auto", "columns", "pca", "projected"), group="student shape")
    init_keep: str = field("norm", "which dims to keep when narrower: norm (largest weights) | first", choices=("norm", "first"), group="student shape")
    freeze_embeddings: bool = field(False, "keep the student's word-embedding table as it starts (the teacher's rows, "
                                           "sliced): only its layers, heads and small embeddings learn. Each step is "
                                           "faster (the largest table gets no gradient), for a little accuracy or "
                                           "none; bench/edge_arms.py compares the two",
                                    group="student shape")
    dropout: float | None = field(None, "dropout probability in the student while it distils, every dropout its family "
                                        "has (hidden states, attention, classifier); the saved config keeps the "
                                        "family's (empty: the student's own, 0.1 for BERT)", min=0, below=1,
                                  group="student shape")
    threads: int = field(0, "threads for a latency target's timing (0: all cores)", min=0, group="student shape")
    latency_runtime: str = field("torch", "runtime a latency target is timed on: torch (PyTorch fp32), onnx (fp32 ONNX "
                                          "Runtime) or onnx-int8 (dynamic int8 with this CPU's defaults): pick the "
                                          "one the student ships in", choices=("torch", "onnx", "onnx-int8"), group="student shape")
    layer_map: str = field("", "student:teacher layers for hidden/attention losses, e.g. 1:2,2:4,3:6 (0 = "
                               "embeddings); default uniform: student i <- teacher round(i*T/S)", group="losses")
    logits_weight: float = field(1.0, "weight of soft-logit KD (KL, T^2-scaled); 0 = off", min=0, group="losses")
    attention_weight: float = field(0.0, "weight of attention-probability transfer; 0 = off", min=0, group="losses")
    embedding_weight: float = field(0.0, "weight of embedding-output MSE; 0 = off", min=0, group="losses")
    hard_weight: float = field(0.0, "weight of cross-entropy with the gold labels; 0 = off", min=0, group="losses")
    temperature: float = field(2.0, "softmax temperature of the logit KD", above=0, group="losses")
    attention_loss: str = field("kl", "kl | mse between attention probabilities", choices=("kl", "mse"), group="losses")
    cache: bool = field(True, "cache the teacher's outputs on disk and reuse them across runs", group="teacher outputs")
    cache_hidden: bool = field(True, "also cache the hidden states and attention maps the losses need (fp16, "
                                     "real tokens only); off: the teacher runs live for those losses", group="teacher outputs")
    doc_stride: int = field(0, "QA: tokens neighbouring windows share (run_qa's name; 0: 128 at max_length 384, "
                               "in proportion otherwise)", min=0, group="data")
    eval_batch_size: int = field(64, "batch size for the teacher pass and the test evaluation", min=1, group="training loop")


@dataclass
class LogitsOptions(LayerOptions, StudentOptions):
    """--objective logits: the task's rows, and transfer sets labelled by the teacher alone."""
    augment: int = field(0, "add up to N perturbed copies of each training text (masking + n-gram "
                            "sampling), labelled by the teacher alone (students/augment.py); 0 = off", min=0, group="data")
    transfer_corpus: str = field("", "corpora (imdb, rotten-tomatoes, sotu, wordnet, .txt files) whose "
                                     "lines join the training set unlabelled, taught by the teacher's soft logits "
                                     "alone (TinyBERT's transfer set); the task's validation/test rows and "
                                     "near-duplicates are removed (core/data/leakguard.py)", group="data")
    small_data: str = field("auto", "a sentence (pair) task below 5,000 training rows: 'auto' switches on what small-data "
                                    "distillation relies on and you did not set (--augment 8 teacher-labelled "
                                    "copies of each row; --hidden-weight 1), recorded in the manifest; 'off' "
                                    "distils on the options as given", choices=("auto", "off"), group="data")
    max_transfer_rows: int = field(0, "at most N transfer-corpus lines: a fixed sample, the same for every --seed, "
                                      "so the teacher's pass over them is cached once (0: all)", min=0, group="data")
    token_dim: int = field(0, "--student bilstm, cnn or bag: the width of the student's token vectors, the top "
                              "principal components of the teacher's input embeddings (0: 256, or the teacher's "
                              "width where narrower)", min=0, group="student shape")
    pooling: str = field("auto", "--student bilstm, cnn or bag: how a text's positions become one vector: max | mean "
                                 "| max-mean (both, side by side); auto: max for bilstm and cnn, mean for bag",
                         choices=("auto", "max", "mean", "max-mean"), group="student shape")
    kernel_sizes: str = field(KERNEL_SIZES, "--student cnn: the filter widths, comma-separated (--hidden filters of each)",
                              group="student shape")
    cross_attention: bool = field(False, "--student bilstm or cnn on a pair task: each token of one text also reads "
                                         "its soft alignment with the other text's tokens (ESIM's, Chen et al. 2017) "
                                         "before pooling, so the two texts are matched word with word",
                                  group="student shape")
    composition: bool = field(False, "with --cross-attention: one more layer of the student's own encoder (a BiLSTM "
                                     "layer, or the CNN's filters) reads each token's state joined with its "
                                     "alignment before pooling (ESIM's inference composition)", group="student shape")


NAME = "logits"  # --objective logits
Options = LogitsOptions


def _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, log) -> dict[str, float]:
    """The teacher's scores on the test rows: from its cached outputs where the task's kind can
    score those (sequence), else from a pass of the teacher."""
    from shrinkbert.core.kinds import kind_of, score_split

    kind = kind_of(task)
    if kind.per_token_outputs or not kind.cacheable_outputs:  # scoring needs the model's own pass
        return score_split(teacher_loader(), test_set, collate, task, cfg.eval_batch_size)
    return kind.score_cached(task, _teacher_test_logits(cfg, teacher_loader, test_set, collate, log), test_set)


def _teacher_test_logits(cfg, teacher_loader, test_set, collate, log):
    from shrinkbert.students.cache import compute_teacher_outputs, load_or_compute
    from shrinkbert.students.distill_data import teacher_cache_dir
    from shrinkbert.students.ensemble import teacher_source

    if cfg.cache:
        cache, _, _ = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, test_set, collate, cfg.max_length,
                                      cache_dir=teacher_cache_dir(cfg),
                                      batch_size=cfg.eval_batch_size, log=log)
    else:
        cache = compute_teacher_outputs(teacher_loader(), test_set, collate, batch_size=cfg.eval_batch_size, log=log)
    return cache.logits.numpy()

def validate(cfg, masked_lm: bool = False) -> None:
    """Refuse option values that cannot go together (each option's own bounds are checked when parsed)."""
    from shrinkbert.students.distill_loss import loss_weights

    if not cfg.teacher:
        raise ShrinkbertError("no teacher given: --teacher DIR")
    if cfg.init_embeddings not in ("auto", "columns") and (cfg.init != "teacher" or cfg.student or masked_lm):
        raise ShrinkbertError(f"--init-embeddings {cfg.init_embeddings} shapes a new student initialised from the "
                              "teacher with --objective logits (not with --init random, --student or --objective "
                              "masked-lm)")
    if cfg.freeze_embeddings and cfg.init_embeddings == "projected":
        raise ShrinkbertError("--freeze-embeddings would freeze the projection --init-embeddings projected learns: "
                              "use one of them")
    from shrinkbert.students.ensemble import primary_teacher  # deferred: it imports torch; --help reads this module

    for role, folder in (("--teacher", primary_teacher(cfg.teacher)), ("--student", cfg.student)):
        if folder not in COMPACT_STUDENTS and is_compact_folder(folder):
            raise ShrinkbertError(f"{role} {folder} is a compact student (not a transformer): it neither teaches "
                                  "nor is distilled into here; distil a new one from the transformer teacher with "
                                  "--student bilstm, cnn or bag")
    if cfg.student in COMPACT_STUDENTS:
        refuse_for_compact(cfg, masked_lm)
    elif (cfg.token_dim or cfg.pooling != "auto" or cfg.kernel_sizes != KERNEL_SIZES or cfg.cross_attention
          or cfg.composition):
        raise ShrinkbertError("--token-dim, --pooling, --kernel-sizes, --cross-attention and --composition shape a "
                              "--student bilstm, cnn or bag")
    if masked_lm and not cfg.corpus:
        raise ShrinkbertError("--objective masked-lm needs --corpus (sotu, wordnet or .txt files)")
    # temperature > 0, weights >= 0 and augment >= 0 are the fields' own bounds (checked when parsed)
    weights = loss_weights(cfg)
    if not weights.active():
        raise ShrinkbertError("every loss weight is 0: switch at least one on (e.g. --logits-weight 1)")
    if (cfg.augment or cfg.transfer_corpus) and not (weights.logits or weights.hidden or weights.attention
                                                     or weights.embedding):
        raise ShrinkbertError("transfer-set rows (--augment, --transfer-corpus) have no gold label: switch on a "
                              "teacher loss (e.g. --logits-weight 1)")


def refuse_for_compact(cfg, masked_lm: bool) -> None:
    """One line for an option a compact student (--student bilstm|cnn|bag) cannot take: it has no
    layers of a transformer to match, nor a target to shape it by."""
    name = f"--student {cfg.student}"
    if masked_lm:
        raise ShrinkbertError(f"{name} learns a task's logits (--objective logits), not masked-LM ones")
    for option in ("hidden_weight", "attention_weight", "embedding_weight"):
        if getattr(cfg, option):
            raise ShrinkbertError(f"{name} has no transformer layers for --{option.replace('_', '-')}: it learns "
                                  "the teacher's logits (--logits-weight) and the gold labels (--hard-weight)")
    if cfg.target or cfg.heads or cfg.intermediate or cfg.init_layers or cfg.init_embeddings != "auto":
        raise ShrinkbertError(f"{name} is shaped by --hidden, --layers and --token-dim (no --target, --heads, "
                              "--intermediate, --init-layers or --init-embeddings)")
    if cfg.kernel_sizes != KERNEL_SIZES and cfg.student != "cnn":
        raise ShrinkbertError(f"--kernel-sizes shapes --student cnn, not {name}")
    if cfg.cross_attention and cfg.student == "bag":
        raise ShrinkbertError(f"--cross-attention aligns the states of an encoder (--student bilstm or cnn); in "
                              f"{name} no token reads another")
    if cfg.composition and not cfg.cross_attention:
        raise ShrinkbertError("--composition reads each token's state joined with its alignment: it needs "
                              "--cross-attention")


def small_data_line(record: dict) -> str:
    """The log's line for what --small-data switched on, or left off (students/distill_data.py)."""
    def options(chosen: dict) -> str:
        return ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in chosen.items())
    if record["switched_on"]:
        return (f"{record['train_rows']:,} training rows is few to distil on: switched on "
                f"{options(record['switched_on'])} (--small-data off distils on the options as given)")
    return (f"{record['train_rows']:,} training rows is few to distil on; --small-data off left "
            f"{options(record['left_off'])} off (--small-data auto switches them on)")


def run(cfg) -> Path:
    """Distil with --objective logits: write the student artifact to cfg.output_dir and return its path."""
    return teach(cfg, masked_lm=False)


def teach(cfg, masked_lm: bool) -> Path:
    """Distil a transformer student on the teacher's logits (and hidden states, attentions): on the task's
    rows, or (`masked_lm`, students/objectives/masked_lm.py) at masked positions of raw --corpus text."""
    # deferred: --help and the generated API read this module's options without torch
    from shrinkbert.core.artifacts import save_model_artifact
    from shrinkbert.core.builtin import resolve_model
    from shrinkbert.core.data.dataspec import resolve_spec, length_records, resolve_max_length
    from shrinkbert.core.families import is_mlm
    from shrinkbert.core.kinds import kind_of, primary_metric, score_split
    from shrinkbert.core.models import check_model_dir, count_parameters, load_config, load_tokenizer
    from shrinkbert.core.train import checkpoint_dir_for, remove_checkpoints, resolve_mixed_precision, train
    from shrinkbert.students.cache import load_or_compute
    from shrinkbert.students.compact_init import build_compact_student
    from shrinkbert.students.distill_data import load_data, make_collate, teacher_cache_dir
    from shrinkbert.students.distill_loss import loss_weights, make_loss_fn
    from shrinkbert.students.distill_models import _teacher_parameters, build_student, load_teacher
    from shrinkbert.students.dropout import override_dropout
    from shrinkbert.students.ensemble import describe_teachers, primary_teacher, split_teachers, teacher_source
    from shrinkbert.students.losses import DistillLoss, format_layer_map, parse_layer_map
    from shrinkbert.students.processes import log_main, process_state
    from shrinkbert.students.projection import fold_projection
    from shrinkbert.students.vocab_map import VOCABULARY_SAMPLE

    validate(cfg, masked_lm)
    started = time.perf_counter()
    weights = loss_weights(cfg)

    teacher_config = load_config(check_model_dir(primary_teacher(cfg.teacher)))
    cfg, asked = resolve_max_length(cfg, kind_of(teacher_config), [primary_teacher(cfg.teacher)])
    if masked_lm and weights.logits and not is_mlm(teacher_config):
        raise ShrinkbertError(f"teacher {cfg.teacher} has no MLM head, so --objective masked-lm cannot distil its MLM "
                              "logits: use --logits-weight 0 with --hidden-weight/--attention-weight, or an MLM teacher")
    tokenizer = load_tokenizer(primary_teacher(cfg.teacher), teacher_config)
    spec = resolve_spec(cfg, split_teachers(cfg.teacher), required=False)
    data_record: dict[str, Any] = {}
    task, train_set, test_set = load_data(cfg, tokenizer, spec, data_record, masked_lm)
    small_data = data_record.pop("small_data", None) or {}
    if small_data:  # few rows: load_data may have switched on a transfer set and the hidden loss
        weights = loss_weights(cfg)
        log_main(f"note: {small_data_line(small_data)}")
    if masked_lm:
        spec = None  # it only guarded the corpus: a masked-LM student carries no task
    if task is not None and task.num_labels != teacher_config.num_labels:
        raise ShrinkbertError(f"task '{task.name}' has {task.num_labels} labels but the teacher predicts "
                              f"{teacher_config.num_labels}: distil a teacher fine-tuned on this task")
    if task is not None:
        teacher_labels = [str(teacher_config.id2label[i]) for i in range(teacher_config.num_labels)]
        generic = all(name == f"LABEL_{i}" for i, name in enumerate(teacher_labels))
        if not generic and teacher_labels != list(task.label_names):
            raise ShrinkbertError(f"the teacher's labels {teacher_labels} are not the task's {list(task.label_names)} "
                                  "(in index order): distil a teacher fine-tuned on this task")
    collate = make_collate(tokenizer, kind_of(task).target_columns)

    compact = cfg.student in COMPACT_STUDENTS  # a new student of its own kind, not a model to distil into
    student_dir = resolve_model(cfg.student) if cfg.student and not compact else ""  # "minilm": the installed folder
    sample = (tokenizer.batch_decode(train_set[:VOCABULARY_SAMPLE]["input_ids"], skip_special_tokens=True)
              if student_dir else None)  # an existing student of another vocabulary is checked on it
    if compact:
        student, student_record = build_compact_student(cfg, teacher_config, tokenizer, pair=bool(task and task.pair))
    else:
        student, student_record = build_student(dataclasses.replace(cfg, student=student_dir), teacher_config, weights,
                                                tokenizer=tokenizer, sample=sample, masked_lm=masked_lm)
    if cfg.freeze_embeddings:  # no gradient, clipping or AdamW state for the (vocab x hidden) table at all
        student.get_input_embeddings().requires_grad_(False)
        student_record["frozen"] = "word embeddings"
    restore_dropout: Callable[[], None] = lambda: None
    if cfg.dropout is not None:
        restore_dropout = override_dropout(student, cfg.dropout)
        student_record["dropout"] = cfg.dropout
    s_layers, t_layers = student.config.num_hidden_layers, teacher_config.num_hidden_layers
    layer_map = parse_layer_map(cfg.layer_map or None, s_layers, t_layers)
    # a compact student has no hidden states to project (its losses are the logits' and the labels')
    student_width = teacher_config.hidden_size if compact else student.config.hidden_size
    distill_loss = DistillLoss(weights, layer_map, student_width, teacher_config.hidden_size,
                               cfg.temperature, cfg.attention_loss)

    teacher_holder: dict[str, Any] = {}

    def teacher_loader():
        if "model" not in teacher_holder:
            # on the process's device (a GPU where there is one): the teacher's pass over the rows is
            # most of a cache miss's time, and slow on a CPU for a base-sized teacher
            teacher_holder["model"] = load_teacher(cfg, need_attentions=bool(weights.attention), masked_lm=masked_lm).to(process_state().device)
        return teacher_holder["model"]

    cache = None
    cache_record: dict[str, Any] = {"used": False}
    live = (masked_lm or not cfg.cache or not kind_of(task).cacheable_outputs
            or ((distill_loss.needs_hidden or distill_loss.needs_attentions) and not cfg.cache_hidden))
    if not live:
        hidden_layers = distill_loss.teacher_hidden_layers() if distill_loss.needs_hidden else []
        attention_layers = distill_loss.teacher_attention_layers()
        # The teacher's pass runs in the precision --mixed-precision resolves to for the teacher's width: under
        # `auto`, bf16 on a CPU with bf16 for a teacher of H160 and up: a faster pass, and students as
        # accurate (bench/teacher_outputs_bf16.py times the pass; bench/edge_arms.py compares the students).
        teacher_precision = resolve_mixed_precision(cfg.mixed_precision, width=teacher_config.hidden_size)
        with process_state().main_process_first():  # the others then find the main process's cache
            cache, cache_file, hit = load_or_compute(teacher_source(cfg.teacher, cfg.temperature), teacher_loader, train_set, collate,
                                                     cfg.max_length, hidden_layers,
                                                     teacher_cache_dir(cfg),
                                                     cfg.eval_batch_size, log=log_main, attention_layers=attention_layers,
                                                     kind=kind_of(task), precision=teacher_precision)
        cache_record = {"used": True, "file": str(cache_file), "hit": hit, "hidden_layers": hidden_layers,
                        **({"rows_per_s": round(cache.rows_per_s, 1)} if cache.rows_per_s else {}),
                        **({"reused_rows": cache.reused_rows} if cache.reused_rows else {}),
                        "attention_layers": [i + 1 for i in attention_layers], "precision": teacher_precision}
    mapped = "" if compact else f", layer map {format_layer_map(layer_map)}"  # a compact student maps no layers
    log_main(f"distilling: losses {weights.active()}{mapped}, teacher "
             f"{'live' if live else 'from cache'}, {len(train_set):,} training rows")

    teacher = teacher_loader() if live else None
    loss_fn = make_loss_fn(distill_loss, teacher=teacher, cache=cache, tokenizer=tokenizer,
                           masked_lm=masked_lm, mlm_probability=cfg.mlm_probability, kind=kind_of(task))
    out_dir = Path(cfg.output_dir)
    checkpoint_dir = checkpoint_dir_for(out_dir)
    # The whole stage config, not just the loop's knobs: a resume with another teacher, temperature
    # or loss weight would silently mix two runs.
    train_metrics = train(student, train_set, collate, loss_fn, cfg, checkpoint_dir,
                          extra_modules=[distill_loss], frozen_modules=[teacher] if teacher is not None else [],
                          desc="distill")
    restore_dropout()

    state = process_state()
    metrics: dict[str, Any] = {k: v for k, v in train_metrics.items() if k != "history"}
    if state.is_main_process:
        student = student.cpu().eval()
        judged_by, judged_name = primary_metric(task)
        if test_set is not None:
            scores = score_split(student, test_set, collate, task, cfg.eval_batch_size)
            metrics.update({f"test_{k}": v for k, v in scores.items() if k != "loss"})
            teacher_scores = _teacher_test_scores(cfg, teacher_loader, test_set, collate, task, log_main)
            metrics.update({f"teacher_test_{k}": v for k, v in teacher_scores.items() if k != "loss"})
            # retention: of the task's primary metric (accuracy; entity F1 for a seqeval task)
            metrics["retention"] = metrics[f"test_{judged_by}"] / max(metrics[f"teacher_test_{judged_by}"], 1e-12)
            metrics["test_rows"] = len(test_set)
        metrics["train_rows"] = len(train_set)  # transfer-set copies (--augment) included
        if fold_projection(student):  # a learned embedding projection becomes a plain table: a plain BERT saved
            student_record["init"]["projection"] = "folded into the word-embedding table"
        num_parameters = count_parameters(student)  # after folding: the model as saved
        teacher_parameters = _teacher_parameters(primary_teacher(cfg.teacher), teacher_config, masked_lm)
        metrics["num_parameters"] = num_parameters
        metrics["parameter_ratio"] = num_parameters / teacher_parameters
        metrics["wall_time_s"] = time.perf_counter() - started
        student.config._attn_implementation = None  # back to the library default in the saved config
        student.config.architectures = None
        parents = split_teachers(cfg.teacher) + ([student_dir] if student_dir else [])
        save_model_artifact(out_dir, student, tokenizer, stage="distill", parents=parents, **length_records(cfg, asked),
                            metrics=metrics, seed=cfg.seed, num_parameters=num_parameters,
                            data=spec.record(task, max_length=cfg.max_length, rows={"train": len(train_set)})
                            if spec is not None else None, extra={
                                "task": task.to_dict() if task is not None else None,
                                "student": {**student_record, "layer_map": None if compact else format_layer_map(layer_map),
                                            "loss_weights": dataclasses.asdict(weights),
                                            "temperature": cfg.temperature,
                                            "projections": PROJECTIONS_NOTE if len(distill_loss.projections) else
                                            "none (student and teacher widths match, or no hidden losses)",
                                            "teacher_outputs": cache_record,
                                            "teachers": describe_teachers(cfg.teacher)},
                                "transfer": data_record,
                                **({"small_data": small_data} if small_data else {}),
                                "history": train_metrics.get("history", [])})
        if test_set is not None:
            log_main(f"student test {judged_name} {metrics[f'test_{judged_by}']:.4f} vs teacher "
                 f"{metrics[f'teacher_test_{judged_by}']:.4f} (retention {metrics['retention']:.1%}), "
                 f"{num_parameters:,} parameters ({metrics['parameter_ratio']:.1%} of the teacher)")
        log_main(f"student written to {out_dir}")
    remove_checkpoints(checkpoint_dir)
    return out_dir
