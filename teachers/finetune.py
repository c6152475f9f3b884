"""Fine-tune a teacher for sequence classification (one sentence or a sentence pair) or token
classification (tagging: named entities, part of speech).

    python -m shrinkbert.teachers.finetune --model minilm --task movie-snippets --output-dir runs/teacher
    accelerate launch -m shrinkbert.teachers.finetune --model runs/mlm --task data.csv --label-column sentiment

The starting model is any safetensors model directory (an MLM artifact, the built-in MiniLM, a
classifier) or a hub name; its classification head is (re)made for the task's labels. The task's
primary metric (accuracy; entity F1 for a seqeval-scored tagging task) is measured on validation
after every epoch and the best epoch's weights are kept (`keep=best`), then the test split is scored
once. The artifact carries id2label/label2id from the task. A token task labels each word on its
first sub-token (`--label-all-subtokens` labels every sub-token in training; scoring stays on first).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from shrinkbert.core.artifacts import save_model_artifact
from shrinkbert.core.config import stage_main
from shrinkbert.core.data.dataspec import load_splits, resolve_spec, length_records, resolve_max_length
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import kind_for_mode, kind_of, primary_metric, score_split
from shrinkbert.core.models import check_model_dir, count_parameters, load_tokenizer
from shrinkbert.core.predict import model_inputs
from shrinkbert.teachers.common import pad_collate, resolve_model_dir
from shrinkbert.teachers.configs import FinetuneConfig as Config


def load_classifier(cfg: Config, task, model_dir: Path | None = None):
    """(model, tokenizer, model dir) with a classification head sized for the task; `model_dir` is
    cfg.model already resolved to a directory (resolved here when not given)."""
    path = check_model_dir(model_dir or resolve_model_dir(cfg.model))
    torch.manual_seed(cfg.seed)  # a new head is initialised from the seed
    model = kind_of(task).model_for_task(path, task)
    tokenizer = load_tokenizer(cfg.tokenizer or path, model.config)
    return model, tokenizer, path


def run(cfg: Config) -> Path:
    from safetensors.torch import load_model as load_weights
    from safetensors.torch import save_model as save_weights

    from shrinkbert.core.data.load import limit_rows, tokenize_task
    from shrinkbert.core.train import LATEST, checkpoint_dir_for, is_main_process, remove_checkpoints, train, wait_for_everyone

    model_dir = resolve_model_dir(cfg.model)
    spec = resolve_spec(cfg, [model_dir])
    task, splits = load_splits(spec, cfg.cache_dir)
    splits = limit_rows(splits, cfg.max_train_rows, cfg.max_eval_rows)
    cfg, asked = resolve_max_length(cfg, kind_of(task), [model_dir])
    # --mode classifier trains the task's own kind (a head for its labels; scored pairs: their vectors)
    task, splits = kind_for_mode(cfg.mode, task).adopt(task, splits)  # e.g. an NLI task's pairs, for an embedder
    model, tokenizer, model_dir = load_classifier(cfg, task, model_dir)
    positions = getattr(model.config, "max_position_embeddings", cfg.max_length)
    if cfg.max_length > positions:
        raise ShrinkbertError(f"max_length {cfg.max_length} exceeds the model's {positions} positions")
    data = tokenize_task(splits, tokenizer, task, cfg.max_length, label_all_subtokens=cfg.label_all_subtokens,
                         doc_stride=cfg.doc_stride)
    judged_by, judged_name = primary_metric(task)
    collate = pad_collate(tokenizer.pad_token_id)

    out = Path(cfg.output_dir)
    ckpt = checkpoint_dir_for(out)
    best_dir = ckpt / "best"  # the best epoch's weights, kept beside the checkpoints so a resume keeps them
    if is_main_process() and (not cfg.resume or not (ckpt / "run" / LATEST).is_file()):
        shutil.rmtree(best_dir, ignore_errors=True)
    wait_for_everyone()

    kind = kind_of(task)

    def loss_fn(m, batch):
        return kind.train_step_loss(m(**model_inputs(m, batch)), batch)

    def eval_fn(m):
        scores = score_split(m, data["validation"], collate, task, cfg.eval_batch_size)
        score = scores[judged_by]
        score_file = best_dir / "score.json"
        saved = json.loads(score_file.read_text()) if score_file.is_file() else {}
        best = saved.get("score", saved.get("validation_accuracy", -1.0))  # (a run resumed from an older kit)
        if score > best and is_main_process():
            best_dir.mkdir(parents=True, exist_ok=True)
            save_weights(m, str(best_dir / "model.safetensors"))
            score_file.write_text(json.dumps({"score": score, "metric": judged_by}))
        return {f"validation_{k}": v for k, v in scores.items()}

    metrics = train(model, data["train"], collate, loss_fn, cfg, ckpt / "run", eval_fn=eval_fn, desc="finetune")
    wait_for_everyone()
    per_epoch = [h[f"validation_{judged_by}"] for h in metrics["history"] if h["kind"] == "eval"]
    if cfg.keep == "best" and (best_dir / "model.safetensors").is_file():
        load_weights(model, str(best_dir / "model.safetensors"))
    result = {f"validation_{judged_by}": (max(per_epoch) if cfg.keep == "best" and per_epoch
                                          else metrics[f"validation_{judged_by}"]),
              f"validation_{judged_by}_per_epoch": per_epoch,
              "train_time_s": metrics["train_time_s"], "train_loss": metrics["train_loss"],
              "steps": metrics["steps"], "epochs": metrics["epochs"], "tokens_per_s": metrics["tokens_per_s"],
              "num_processes": metrics["num_processes"], "mixed_precision": metrics.get("mixed_precision"),
              "train_examples": len(data["train"]),
              "validation_examples": len(data["validation"]), "test_examples": len(data["test"]),
              "loss_curve": [[h["step"], h["loss"]] for h in metrics["history"] if h["kind"] == "train"]}
    if is_main_process():
        result.update({f"test_{k}": v for k, v in score_split(model, data["test"], collate, task,
                                                             cfg.eval_batch_size).items()})
        model.config.id2label, model.config.label2id = task.id2label, task.label2id
        save_model_artifact(out, model, tokenizer, stage="finetune", parents=[model_dir], **length_records(cfg, asked),
                            metrics=result, seed=cfg.seed, num_parameters=count_parameters(model),
                            data=spec.record(task, max_length=cfg.max_length,
                                             rows={k: len(v) for k, v in splits.items()})
                            if kind.passes_on(task) else None,
                            extra={"task": task.to_dict(), "kind": kind.name})
        print(f"finetune: {task.name} validation {judged_name} {result[f'validation_{judged_by}']:.4f}, "
              f"test {judged_name} {result[f'test_{judged_by}']:.4f} in {result['train_time_s']:.0f} s -> {out}")
    wait_for_everyone()
    remove_checkpoints(ckpt)
    return out


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
