"""Masked-language-model pretraining (optionally with next-sentence prediction), from scratch or continued.

    python -m shrinkbert.teachers.pretrain --preset tiny --tokenizer runs/tok --corpus sotu --output-dir runs/mlm
    accelerate launch -m shrinkbert.teachers.pretrain --model minilm --corpus sotu,wordnet --output-dir runs/mlm
    shrinkbert pretrain --teacher runs/demo/teacher --layers 2 --hidden 160 --corpus all --output-dir runs/pre-2L

Masking is BERT's: 15% of the (non-special, non-padding) tokens are selected; of those 80% become
[MASK], 10% a random token, 10% stay. `masking=static` draws the masks once per example (seeded),
`masking=dynamic` draws them afresh for every batch (in the loss, on the checkpointed RNG, so a
resumed run masks exactly as an uninterrupted one). With `nsp` on, examples are sentence pairs from
consecutive lines, half of them with a random second line, and the model is BertForPreTraining.

Continuing from a model without an MLM head (the built-in MiniLM is a bare encoder): the head is
new, so it is first warmed up alone (`head_warmup_steps`, encoder frozen), then everything trains.
Any encoder family continues (its AutoModelForMaskedLM class; next-sentence prediction is BERT's
only), and so does a `--teacher` student; from scratch is BERT (the BERT-base/-large presets).

A student (`--teacher T` with distill's shape fields): a new masked-LM model of T's family and that
shape, sliced from the teacher or random, pretrained with MLM and/or MLM-KD against an MLM teacher
(teachers/pretrain_student.py), for `shrinkbert distill --student` later.

The words of the training text are counted (per source, printed and in the manifest), as are the
words seen and words/s. A finished run is kept in the cache under a key over its config, models and
text (teachers/reuse.py): the same student run again copies it instead of training (`--reuse off`
trains; `--reuse on` reuses continued and from-scratch runs too).
"""
from __future__ import annotations

import dataclasses
import math
import random
import sys
from pathlib import Path

import torch

from shrinkbert.core.artifacts import save_model_artifact
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families import is_mlm, next_sentence_prediction
from shrinkbert.core.kinds.losses import kd_logits_loss
from shrinkbert.core.masking import Masker
from shrinkbert.core.models import check_model_dir, count_parameters, load_model, load_tokenizer
from shrinkbert.core.predict import model_inputs
from shrinkbert.core.quiet import new_head_reported
from shrinkbert.teachers import pretrain_student, reuse
from shrinkbert.teachers.common import pad_collate, resolve_model_dir
from shrinkbert.teachers.configs import PRESETS, PretrainConfig as Config


def preset_config(name: str, vocab_size: int, max_position_embeddings: int = 512, **overrides):
    from transformers import BertConfig

    if name not in PRESETS:
        raise ShrinkbertError(f"unknown preset '{name}' (known: {', '.join(PRESETS)})")
    return BertConfig(vocab_size=vocab_size, max_position_embeddings=max_position_embeddings,
                      **{**PRESETS[name], **overrides})


# --------------------------------------------------------------------------------------------
# Examples


def block_examples(lines: list[str], tokenizer, max_length: int) -> dict[str, list]:
    """Lines tokenized, concatenated and cut into [CLS] block [SEP] examples of max_length tokens."""
    stream: list[int] = []
    for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
    width = max_length - 2
    blocks = [stream[i:i + width] for i in range(0, len(stream), width)]
    blocks = [b for b in blocks if len(b) >= min(width, 8)]  # drop a runt tail
    input_ids = [tokenizer.build_inputs_with_special_tokens(b) for b in blocks]
    return {"input_ids": input_ids, "token_type_ids": [[0] * len(x) for x in input_ids],
            "attention_mask": [[1] * len(x) for x in input_ids]}


def nsp_pairs(lines: list[str], seed: int) -> list[tuple[str, str, int]]:
    """(a, b, label): b follows a (label 0) or, half the time, is a random other line (label 1)."""
    if len(lines) < 3:
        raise ShrinkbertError("next-sentence prediction needs at least 3 lines of text")
    rng = random.Random(seed)
    pairs = []
    for i in range(len(lines) - 1):
        if rng.random() < 0.5:
            pairs.append((lines[i], lines[i + 1], 0))
        else:
            j = rng.randrange(len(lines) - 2)
            j = j + 2 if j >= i else j  # any line but i and i+1
            pairs.append((lines[i], lines[j], 1))
    return pairs


def pair_examples(lines: list[str], tokenizer, max_length: int, seed: int) -> dict[str, list]:
    pairs = nsp_pairs(lines, seed)
    enc = tokenizer([a for a, _, _ in pairs], [b for _, b, _ in pairs], truncation="longest_first",
                    max_length=max_length, return_token_type_ids=True, return_attention_mask=True)
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"],
            "attention_mask": enc["attention_mask"], "next_sentence_label": [label for _, _, label in pairs]}


def make_examples(lines, tokenizer, cfg: Config, seed: int, masker: Masker | None):
    """A datasets.Dataset of examples; with a masker, masks are applied once (static masking)."""
    import datasets

    examples = pair_examples(lines, tokenizer, cfg.max_length, seed) if cfg.nsp else \
        block_examples(lines, tokenizer, cfg.max_length)
    if masker is not None:
        generator = torch.Generator().manual_seed(seed)
        masked, labels = [], []
        for ids in examples["input_ids"]:
            m, lab = masker(torch.tensor([ids]), generator)
            masked.append(m[0].tolist())
            labels.append(lab[0].tolist())
        examples["input_ids"], examples["labels"] = masked, labels
    return datasets.Dataset.from_dict(examples)


# --------------------------------------------------------------------------------------------
# Loss


def masked_forward(model, batch: dict, labels: torch.Tensor):
    """(MLM logits at the masked positions only, their labels, NSP logits or None).

    The vocabulary projection is the costliest matmul of a small BERT (hidden x 30k for every token);
    only ~15% of positions carry a label, so the head runs on those rows alone (6-7x less head work).
    """
    from transformers import PreTrainedModel

    inputs = model_inputs(model, batch)
    # a DDP/FSDP wrapper must see the forward itself (gradient sync, unsharding): plain forward there
    bare = isinstance(model, PreTrainedModel)
    encoder, heads = getattr(model, "bert", None), getattr(model, "cls", None)
    picked = labels != -100
    if not bare or encoder is None or heads is None:  # wrapped, or not a BERT head layout
        out = model(**inputs)
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        return logits[picked], labels[picked], getattr(out, "seq_relationship_logits", None)
    encoded = encoder(**inputs)
    sequence = encoded[0]
    if hasattr(heads, "seq_relationship"):  # BertForPreTraining: MLM + NSP heads
        return heads.predictions(sequence[picked]), labels[picked], heads.seq_relationship(encoded[1])
    return heads.predictions(sequence[picked]), labels[picked], None


def mlm_loss(model, batch: dict, masker: Masker | None, kd_teacher=None, mlm_weight: float = 1.0,
             kd_weight: float = 0.0, temperature: float = 2.0):
    """(loss, logs) for one batch; masker given: dynamic masking drawn here from the global RNG.
    kd_teacher given: its predictions at the same masked tokens teach too (weight kd_weight)."""
    batch = dict(batch)
    if masker is not None:
        batch["input_ids"], batch["labels"] = masker(batch["input_ids"])
    labels = batch.pop("labels")
    nsp_labels = batch.pop("next_sentence_label", None)
    logits, targets, nsp_logits = masked_forward(model, batch, labels)
    # a batch with no masked token (possible on very short lines) contributes zero, not NaN
    mlm = torch.nn.functional.cross_entropy(logits.float(), targets) if len(targets) else logits.sum() * 0.0
    loss, logs = mlm_weight * mlm, {"mlm_loss": mlm.detach()}
    if kd_teacher is not None:
        with torch.no_grad():
            teacher_logits, _, _ = masked_forward(kd_teacher, batch, labels)
        kd = kd_logits_loss(logits, teacher_logits, temperature)
        loss, logs["kd_loss"] = loss + kd_weight * kd, kd.detach()
    if nsp_labels is None or nsp_logits is None:
        return loss, logs
    nsp = torch.nn.functional.cross_entropy(nsp_logits.float(), nsp_labels)
    nsp_acc = (nsp_logits.argmax(-1) == nsp_labels).float().mean()
    return loss + nsp, {**logs, "nsp_loss": nsp.detach(), "nsp_accuracy": nsp_acc}


def heldout_metrics(model, dataset, collate, batch_size: int) -> dict[str, float]:
    """MLM loss per predicted token (and NSP accuracy) on statically masked held-out examples."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count, nsp_right, nsp_n = 0.0, 0, 0, 0
    with torch.no_grad():
        for start in range(0, len(dataset), batch_size):
            batch = {k: v.to(device) for k, v in collate([dataset[i] for i in
                                                         range(start, min(start + batch_size, len(dataset)))]).items()}
            labels = batch.pop("labels")
            nsp_labels = batch.pop("next_sentence_label", None)
            logits, targets, nsp_logits = masked_forward(model, batch, labels)
            total += float(torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum"))
            count += len(targets)
            if nsp_labels is not None and nsp_logits is not None:
                nsp_right += int((nsp_logits.argmax(-1) == nsp_labels).sum())
                nsp_n += len(nsp_labels)
    model.train(was_training)
    result = {"heldout_mlm_loss": total / max(count, 1)}
    if nsp_n:
        result["heldout_nsp_accuracy"] = nsp_right / nsp_n
    return result


# --------------------------------------------------------------------------------------------
# The start: a new model or one to continue


def load_start(cfg: Config):
    """(model, tokenizer, parents, head_is_new, student record or None) for a from-scratch or continued run,
    or a student made from a teacher (teachers/pretrain_student.py)."""
    from transformers import BertForMaskedLM, BertForPreTraining

    model_cls = BertForPreTraining if cfg.nsp else BertForMaskedLM
    # Seeded before any load: a continued run's new MLM head is initialised from the global RNG, and
    # unseeded it made two runs of the same recipe and seed train different teachers.
    torch.manual_seed(cfg.seed)
    if pretrain_student.wants_student(cfg):
        student, tokenizer, parents, record = pretrain_student.build_student(cfg, model_cls)
        return student, tokenizer, parents, False, record
    if cfg.model:
        path = check_model_dir(resolve_model_dir(cfg.model))
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(path)
        if not next_sentence_prediction(model_config):  # every family has a masked-LM class; NSP is BERT's alone
            from transformers import AutoModelForMaskedLM

            if cfg.nsp:
                raise ShrinkbertError(f"{path} is a {model_config.model_type} model: next-sentence prediction is "
                                      "BERT's objective (continue it without --nsp)")
            model_cls = AutoModelForMaskedLM
        head_is_new = not is_mlm(model_config)
        with new_head_reported("pretrain"):  # a new MLM head is warmed up and trained here: named in one line
            model = load_model(model_cls, path)
        tokenizer = load_tokenizer(cfg.tokenizer or path, model.config)
        parents = [path] + ([cfg.tokenizer] if cfg.tokenizer else [])
        return model, tokenizer, parents, head_is_new, None
    tokenizer = load_tokenizer(cfg.tokenizer)  # given: run() checked
    model = model_cls(preset_config(cfg.preset, len(tokenizer), max(512, cfg.max_length)))
    return model, tokenizer, [cfg.tokenizer], False, None


# --------------------------------------------------------------------------------------------
# The text: sources, the leak guard, words


def corpus_sources(names: list[str]) -> list[str]:
    """The corpus names with `all` standing for every built-in corpus (each source once, in order)."""
    from shrinkbert.core.data.builtin_data import CORPORA

    expanded: list[str] = []
    for name in names:
        for part in [p.strip() for p in str(name).split(",") if p.strip()]:
            expanded.extend(CORPORA if part == "all" else [part])
    return list(dict.fromkeys(expanded))


def count_words(lines: list[str]) -> int:
    """Whitespace-separated words (the unit the papers count pretraining text in)."""
    return sum(len(line.split()) for line in lines)


def read_text(cfg: Config) -> tuple[list[str], dict[str, int], dict]:
    """(lines, words per source, leak-guard record). With max_train_rows each source gives an equal
    share of its first lines (as core.data.load.load_corpus does). When the teacher or start model
    records a task, that task's validation and test texts are removed (as distill's mode general does)."""
    from shrinkbert.core.data.dataspec import load_splits, resolve_spec
    from shrinkbert.core.data.leakguard import LeakGuard, describe
    from shrinkbert.core.data.load import load_corpus

    sources = corpus_sources(cfg.corpus)
    if not sources:
        raise ShrinkbertError("no corpus given (built-ins: all, sotu, wordnet, imdb, rotten-tomatoes, brown; or .txt files)")
    share = math.ceil(cfg.max_train_rows / len(sources)) if cfg.max_train_rows else None
    parts = [(source, load_corpus([source], max_lines=share, cache_dir=cfg.cache_dir or None)) for source in sources]
    guard_record: dict = {}
    parents = [p for p in (cfg.teacher, cfg.model) if p and Path(p).is_dir()]
    spec = resolve_spec(cfg, parents, required=False) if parents else None
    if spec is not None:
        task, splits = load_splits(spec, cfg.cache_dir or None)
        guard = LeakGuard.for_splits(splits, name=task.name)
        total = sum(len(lines) for _, lines in parts)
        parts = [(source, guard.filter(lines)[0]) for source, lines in parts]
        removed = total - sum(len(lines) for _, lines in parts)
        guard_record = {"task": guard.name, "removed": removed, "of": total}
        print(f"pretrain: {describe(removed, total, guard, 'corpus lines')}", file=sys.stderr, flush=True)
    lines: list[str] = []
    words: dict[str, int] = {}
    for source, source_lines in parts:
        if cfg.max_train_rows:
            source_lines = source_lines[:max(0, cfg.max_train_rows - len(lines))]
        lines.extend(source_lines)
        words[source] = count_words(source_lines)
    return lines, words, guard_record


def start_models(cfg: Config) -> dict[str, str | None]:
    """The models a run reads (their content goes into the reuse key)."""
    return {"model": str(resolve_model_dir(cfg.model)) if cfg.model else None, "tokenizer": cfg.tokenizer or None,
            "teacher": str(resolve_model_dir(cfg.teacher)) if cfg.teacher else None, "kd_teacher": pretrain_student.kd_teacher_dir(cfg) or None}


# --------------------------------------------------------------------------------------------
# The stage


def run(cfg: Config) -> Path:
    from shrinkbert.core.train import checkpoint_dir_for, is_main_process, remove_checkpoints, wait_for_everyone

    if cfg.masking not in ("dynamic", "static"):
        raise ShrinkbertError(f"masking must be dynamic or static, got '{cfg.masking}'")
    if not 0 < cfg.heldout_fraction < 1:
        raise ShrinkbertError(f"heldout_fraction must be between 0 and 1, got {cfg.heldout_fraction}")
    pretrain_student.check(cfg)
    if not (cfg.model or cfg.teacher or cfg.tokenizer):  # before any text is read
        raise ShrinkbertError("pretraining from scratch needs --tokenizer (train one: python -m shrinkbert.teachers.tokenizer)")
    out = Path(cfg.output_dir)
    lines, words, guard_record = read_text(cfg)
    key = reuse.content_key(to_dict(cfg), start_models(cfg), lines)
    reusing = cfg.reuse == "on" or (cfg.reuse == "auto" and pretrain_student.wants_student(cfg))
    found = reuse.find(key, cfg.cache_dir or None) if reusing else None
    if found is not None:  # every process finds the same entry; the main one copies it
        if is_main_process():
            if out.resolve() != found.resolve():
                reuse.copy_artifact(found, out)
            print(f"pretrain: reused {found} (same config, models and text; --reuse off trains again) -> {out}")
        wait_for_everyone()
        return out
    result, model, tokenizer, parents, record = _pretrain(cfg, lines, words)
    if guard_record:
        result["leak_guard"] = guard_record
    if is_main_process():
        extra = {"corpus": list(cfg.corpus), "corpus_words": words, "content_key": key}
        if record is not None:
            extra["student"] = record
        save_model_artifact(out, model, tokenizer, stage="pretrain",
                            parents=parents + [c for c in cfg.corpus if Path(c).is_file()], config=to_dict(cfg),
                            metrics=result, seed=cfg.seed, num_parameters=count_parameters(model), extra=extra)
        if reusing:
            reuse.store(out, key, cfg.cache_dir or None)
        print(f"pretrain: {result['train_words']:,} words of text ({', '.join(f'{s} {n:,}' for s, n in words.items())}), "
              f"{result['words_seen']:,.0f} seen at {result['words_per_s']:,.0f} words/s "
              f"({result['tokens_per_s']:,.0f} tokens/s); held-out MLM loss {result['heldout_mlm_loss_before']:.3f} -> "
              f"{result['heldout_mlm_loss_after']:.3f} in {result['train_time_s']:.0f} s -> {out}")
    wait_for_everyone()
    remove_checkpoints(checkpoint_dir_for(out))
    return out


def _pretrain(cfg: Config, lines: list[str], words: dict[str, int]):
    """Train on the lines; (metrics, model, tokenizer, parents, student record or None)."""
    from shrinkbert.core.train import checkpoint_dir_for, train

    ckpt = checkpoint_dir_for(Path(cfg.output_dir))
    model, tokenizer, parents, head_is_new, record = load_start(cfg)
    if cfg.max_length > model.config.max_position_embeddings:
        raise ShrinkbertError(f"max_length {cfg.max_length} exceeds the model's "
                              f"{model.config.max_position_embeddings} positions")
    kd_teacher = pretrain_student.load_kd_teacher(cfg, model.config.vocab_size)
    if kd_teacher is not None:
        parents.append(pretrain_student.kd_teacher_dir(cfg))

    n_heldout = max(1, int(len(lines) * cfg.heldout_fraction))
    if len(lines) - n_heldout < 2:
        raise ShrinkbertError(f"the corpus has {len(lines)} lines: too few to pretrain on")
    masker = Masker(tokenizer, cfg.mlm_probability)
    # Held-out text is the end of the corpus (contiguous, so NSP pairs stay within it), masked once.
    train_set = make_examples(lines[:-n_heldout], tokenizer, cfg, cfg.seed,
                              masker if cfg.masking == "static" else None)
    heldout = make_examples(lines[-n_heldout:], tokenizer, cfg, cfg.seed + 1, masker)
    heldout = heldout.select(range(min(len(heldout), cfg.heldout_max_examples)))
    if len(heldout) == 0:
        raise ShrinkbertError("the held-out text gives no examples; raise heldout_fraction or add text")
    collate = pad_collate(tokenizer.pad_token_id)
    dynamic = masker if cfg.masking == "dynamic" else None

    def loss_fn(m, batch):
        return mlm_loss(m, batch, dynamic, kd_teacher, cfg.mlm_weight, cfg.kd_weight, cfg.temperature)

    def eval_fn(m):
        return heldout_metrics(m, heldout, collate, cfg.eval_batch_size)

    frozen = [kd_teacher] if kd_teacher is not None else []
    before = heldout_metrics(model, heldout, collate, cfg.eval_batch_size)
    head_metrics = {}
    if head_is_new and cfg.head_warmup_steps > 0:
        model.base_model.requires_grad_(False)
        head_cfg = dataclasses.replace(cfg, max_steps=cfg.head_warmup_steps, learning_rate=cfg.head_learning_rate,
                                       warmup_steps=0, warmup_ratio=0.0)
        head_metrics = train(model, train_set, collate, loss_fn, head_cfg, ckpt / "head", desc="mlm head warm-up",
                             frozen_modules=frozen)
        model.base_model.requires_grad_(True)
    metrics = train(model, train_set, collate, loss_fn, cfg, ckpt / "full", eval_fn=eval_fn, desc="pretrain",
                    frozen_modules=frozen)
    return (_result(cfg, metrics, head_metrics, before, len(train_set), len(heldout), count_words(lines[:-n_heldout])),
            model, tokenizer, parents, record)


def _result(cfg: Config, metrics: dict, head_metrics: dict, before: dict, n_train: int, n_heldout: int,
            train_words: int) -> dict:
    """The manifest's metrics: losses before/after, the curve, time, throughput and words seen."""
    curve = [[h["step"], h.get("mlm_loss", h["loss"])] for h in metrics["history"] if h["kind"] == "train"]
    train_time = metrics["train_time_s"] + head_metrics.get("train_time_s", 0.0)
    words_seen = train_words * metrics["epochs"]  # passes over the text (steps / steps per epoch)
    result = {"heldout_mlm_loss_before": before["heldout_mlm_loss"],
              "heldout_mlm_loss_after": metrics["heldout_mlm_loss"],
              "mlm_loss_curve": curve,
              # per logging window: a compiled run's first window holds the compile
              "tokens_per_s_curve": [[h["step"], h["tokens_per_s"]] for h in metrics["history"] if h["kind"] == "train"],
              "heldout_mlm_loss_per_epoch": [[h["step"], h["heldout_mlm_loss"]] for h in metrics["history"]
                                             if h["kind"] == "eval"],
              "train_time_s": train_time,
              "steps": metrics["steps"], "tokens_per_s": metrics["tokens_per_s"],
              "train_examples": n_train, "heldout_examples": n_heldout,
              "train_words": train_words, "words_seen": words_seen, "words_per_s": words_seen / max(train_time, 1e-9),
              "num_processes": metrics["num_processes"], "mixed_precision": metrics.get("mixed_precision")}
    if any("kd_loss" in h for h in metrics["history"]):
        result["kd_loss_curve"] = [[h["step"], h["kd_loss"]] for h in metrics["history"]
                                   if h["kind"] == "train" and "kd_loss" in h]
    if "heldout_nsp_accuracy" in metrics:
        result["heldout_nsp_accuracy_before"] = before.get("heldout_nsp_accuracy")
        result["heldout_nsp_accuracy_after"] = metrics["heldout_nsp_accuracy"]
    if head_metrics:
        result["head_warmup"] = {"steps": head_metrics["steps"], "train_loss": head_metrics["train_loss"]}
    return result


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
