"""Masked-language-model pretraining (optionally with next-sentence prediction), from scratch or continued.

    python -m shrinkbert.teachers.pretrain --preset tiny --tokenizer runs/tok --corpus sotu --output-dir runs/mlm
    accelerate launch -m shrinkbert.teachers.pretrain --model minilm --corpus sotu,wordnet --output-dir runs/mlm

Masking is BERT's: 15% of the (non-special, non-padding) tokens are selected; of those 80% become
[MASK], 10% a random token, 10% stay. `masking=static` draws the masks once per example (seeded),
`masking=dynamic` draws them afresh for every batch (in the loss, on the checkpointed RNG, so a
resumed run masks exactly as an uninterrupted one). With `nsp` on, examples are sentence pairs from
consecutive lines, half of them with a random second line, and the model is BertForPreTraining.

Continuing from a model without an MLM head (the built-in MiniLM is a bare encoder): the head is
new, so it is first warmed up alone (`head_warmup_steps`, encoder frozen), then everything trains.
"""
from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import torch

from shrinkbert.core.artifacts import save_model_artifact
from shrinkbert.core.config import field, stage_main, to_dict
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.masking import Masker
from shrinkbert.core.models import check_model_dir, count_parameters, load_model, load_tokenizer
from shrinkbert.core.predict import model_inputs
from shrinkbert.core.train import TrainConfig
from shrinkbert.teachers.common import pad_collate, resolve_model_dir

PRESETS = {  # name -> BertConfig shape
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "bert-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "micro": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),  # smoke tests
}


@dataclasses.dataclass
class Config(TrainConfig):
    output_dir: str = field("runs/mlm", "where the pretrained model artifact is written", group="output")
    model: str = field("", "continue from this model (dir, 'minilm' or hub name); empty: from scratch with preset", group="model")
    preset: str = field("tiny", "shape when training from scratch", choices=tuple(PRESETS))
    tokenizer: str = field("", "tokenizer dir (required from scratch; default: the model's own)")
    corpus: list[str] = field(["sotu"], "built-in corpora (sotu, wordnet) and/or .txt files, comma-separated")
    max_train_rows: int = field(0, "use at most this many lines (rows) of text (0: all)", min=0)
    max_length: int = field(128, "tokens per example, [CLS] and [SEP] included", min=8, max=8192)
    nsp: bool = field(False, "add next-sentence prediction (BertForPreTraining, sentence-pair examples)")
    masking: str = field("dynamic", "dynamic (new masks every batch) or static (masks fixed per example)", choices=("dynamic", "static"))
    mlm_probability: float = field(0.15, "fraction of tokens selected for prediction", above=0, max=1)
    head_warmup_steps: int = field(100, "continued runs: steps training only the new MLM head first", min=0)
    head_learning_rate: float = field(5e-4, "learning rate for the head warm-up", above=0)
    heldout_fraction: float = field(0.02, "fraction of the text held out to measure MLM loss", above=0, below=1)
    heldout_max_examples: int = field(512, "at most this many held-out examples", min=1)
    eval_batch_size: int = field(64, "batch size for the held-out loss", min=1)
    learning_rate: float = field(1e-4, "peak learning rate (AdamW)", above=0)
    epochs: float = field(1, "passes over the training text", min=0)
    checkpoint_every: int = field(500, "save a resumable checkpoint every N optimizer steps (0: never)", min=0)


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


def mlm_loss(model, batch: dict, masker: Masker | None):
    """(loss, logs) for one batch; masker given: dynamic masking drawn here from the global RNG."""
    batch = dict(batch)
    if masker is not None:
        batch["input_ids"], batch["labels"] = masker(batch["input_ids"])
    labels = batch.pop("labels")
    nsp_labels = batch.pop("next_sentence_label", None)
    logits, targets, nsp_logits = masked_forward(model, batch, labels)
    # a batch with no masked token (possible on very short lines) contributes zero, not NaN
    mlm = torch.nn.functional.cross_entropy(logits.float(), targets) if len(targets) else logits.sum() * 0.0
    if nsp_labels is None or nsp_logits is None:
        return mlm, {"mlm_loss": mlm.detach()}
    nsp = torch.nn.functional.cross_entropy(nsp_logits.float(), nsp_labels)
    nsp_acc = (nsp_logits.argmax(-1) == nsp_labels).float().mean()
    return mlm + nsp, {"mlm_loss": mlm.detach(), "nsp_loss": nsp.detach(), "nsp_accuracy": nsp_acc}


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
# The stage


def load_start(cfg: Config):
    """(model, tokenizer, parents, head_is_new) for a from-scratch or continued run."""
    from transformers import BertForMaskedLM, BertForPreTraining

    model_cls = BertForPreTraining if cfg.nsp else BertForMaskedLM
    # Seeded before any load: a continued run's new MLM head is initialised from the global RNG, and
    # unseeded it made two runs of the same recipe and seed train different teachers.
    torch.manual_seed(cfg.seed)
    if cfg.model:
        path = check_model_dir(resolve_model_dir(cfg.model))
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(path)
        if model_config.model_type != "bert":
            raise ShrinkbertError(f"{path} is a {model_config.model_type} model; pretraining continues BERT models only")
        architectures = model_config.architectures or []
        head_is_new = not any(a in ("BertForMaskedLM", "BertForPreTraining") for a in architectures)
        model = load_model(model_cls, path)
        tokenizer = load_tokenizer(cfg.tokenizer or path, model.config)
        parents = [path] + ([cfg.tokenizer] if cfg.tokenizer else [])
        return model, tokenizer, parents, head_is_new
    if not cfg.tokenizer:
        raise ShrinkbertError("pretraining from scratch needs --tokenizer (train one: python -m shrinkbert.teachers.tokenizer)")
    tokenizer = load_tokenizer(cfg.tokenizer)
    model = model_cls(preset_config(cfg.preset, len(tokenizer), max(512, cfg.max_length)))
    return model, tokenizer, [cfg.tokenizer], False


def run(cfg: Config) -> Path:
    from shrinkbert.core.data.load import load_corpus
    from shrinkbert.core.train import checkpoint_dir_for, is_main_process, remove_checkpoints, train, wait_for_everyone

    if cfg.masking not in ("dynamic", "static"):
        raise ShrinkbertError(f"masking must be dynamic or static, got '{cfg.masking}'")
    if not 0 < cfg.heldout_fraction < 1:
        raise ShrinkbertError(f"heldout_fraction must be between 0 and 1, got {cfg.heldout_fraction}")
    out = Path(cfg.output_dir)
    ckpt = checkpoint_dir_for(out)
    model, tokenizer, parents, head_is_new = load_start(cfg)
    if cfg.max_length > model.config.max_position_embeddings:
        raise ShrinkbertError(f"max_length {cfg.max_length} exceeds the model's "
                              f"{model.config.max_position_embeddings} positions")

    lines = load_corpus(cfg.corpus, max_lines=cfg.max_train_rows or None)
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
        return mlm_loss(m, batch, dynamic)

    def eval_fn(m):
        return heldout_metrics(m, heldout, collate, cfg.eval_batch_size)

    before = heldout_metrics(model, heldout, collate, cfg.eval_batch_size)
    head_metrics = {}
    if head_is_new and cfg.head_warmup_steps > 0:
        model.base_model.requires_grad_(False)
        head_cfg = dataclasses.replace(cfg, max_steps=cfg.head_warmup_steps, learning_rate=cfg.head_learning_rate,
                                       warmup_steps=0, warmup_ratio=0.0)
        head_metrics = train(model, train_set, collate, loss_fn, head_cfg, ckpt / "head", desc="mlm head warm-up")
        model.base_model.requires_grad_(True)
    metrics = train(model, train_set, collate, loss_fn, cfg, ckpt / "full", eval_fn=eval_fn, desc="pretrain")

    curve = [[h["step"], h.get("mlm_loss", h["loss"])] for h in metrics["history"] if h["kind"] == "train"]
    result = {"heldout_mlm_loss_before": before["heldout_mlm_loss"],
              "heldout_mlm_loss_after": metrics["heldout_mlm_loss"],
              "mlm_loss_curve": curve,
              "heldout_mlm_loss_per_epoch": [[h["step"], h["heldout_mlm_loss"]] for h in metrics["history"]
                                             if h["kind"] == "eval"],
              "train_time_s": metrics["train_time_s"] + head_metrics.get("train_time_s", 0.0),
              "steps": metrics["steps"], "tokens_per_s": metrics["tokens_per_s"],
              "train_examples": len(train_set), "heldout_examples": len(heldout),
              "num_processes": metrics["num_processes"]}
    if "heldout_nsp_accuracy" in metrics:
        result["heldout_nsp_accuracy_before"] = before.get("heldout_nsp_accuracy")
        result["heldout_nsp_accuracy_after"] = metrics["heldout_nsp_accuracy"]
    if head_metrics:
        result["head_warmup"] = {"steps": head_metrics["steps"], "train_loss": head_metrics["train_loss"]}

    if is_main_process():
        save_model_artifact(out, model, tokenizer, stage="pretrain",
                            parents=parents + [c for c in cfg.corpus if Path(c).is_file()], config=to_dict(cfg),
                            metrics=result, seed=cfg.seed, num_parameters=count_parameters(model),
                            extra={"corpus": list(cfg.corpus)})
        print(f"pretrain: held-out MLM loss {result['heldout_mlm_loss_before']:.3f} -> "
              f"{result['heldout_mlm_loss_after']:.3f} in {result['train_time_s']:.0f} s -> {out}")
    wait_for_everyone()
    remove_checkpoints(ckpt)
    return out


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
