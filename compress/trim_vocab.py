"""Vocabulary trimming: keep only the tokens a corpus uses, shrinking embeddings and tokenizer together.

The kept tokens keep their relative order and get new ids 0..n-1; the embedding matrix keeps
the same rows in the same order, and tokenizer.json, vocab.txt and tokenizer_config.json are
rewritten with the new ids. WordPiece is greedy longest-match-first, so removing tokens a text
never used cannot change how that text splits: on covered text the trimmed model gives the same
logits (checked here on every corpus text before the artifact is written). Text outside the corpus
may split differently (into the kept characters) or hit [UNK].

A kind whose model meets text at use time that no split holds (`TaskKind.open_vocabulary`: QA,
whose contexts are new documents) is trimmed on its train and validation texts only and measured
on its test split's texts as unseen text: the share of their tokens that become [UNK] and how many
more tokens they split into. Past either bound (--max-unseen-unk-rate, --max-unseen-token-increase)
the stage refuses with one line and writes nothing: words split into characters read as noise to
a model that never trained on those pieces, and longer windows cost latency, so for such a task a
trimmed vocabulary only pays where the use-time text is as narrow as the training text (then
raise the bounds, or give --corpus-files of that text).
"""
from __future__ import annotations

import json
import string
import sys
from pathlib import Path

import torch

from shrinkbert.compress.common import load_pt
from shrinkbert.compress.configs import TrimVocabConfig as Config
from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.data.dataspec import load_splits, resolve_spec
from shrinkbert.core.errors import ShrinkbertError, require
from shrinkbert.core.kinds import kind_for_stage, kind_of, require_stage
from shrinkbert.core.models import count_parameters


def corpus_texts(cfg: Config, spec=None) -> tuple[list[str | tuple[str, str]], list]:
    """(the texts whose tokens are kept, unseen texts to measure the trimmed tokenizer on). Kept: every
    split of the task (so no test word becomes [UNK]) plus files; for an open-vocabulary kind (QA)
    train and validation only, its test texts being the unseen ones."""
    texts: list = []
    unseen: list = []
    if spec is not None:
        task, dsd = load_splits(spec, cfg.cache_dir)
        kind = kind_of(task)
        for name, split in dsd.items():
            (unseen if kind.open_vocabulary and name == "test" else texts).extend(kind.texts(split))
    for file in cfg.corpus_files:
        path = Path(file)
        require(path.is_file(), f"corpus file {path} does not exist")
        texts.extend(line.rstrip("\n") for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip())
    require(bool(texts), "trim-vocab needs a corpus: pass --task TASK and/or --corpus-files FILE")
    return (texts[:cfg.max_train_rows] if cfg.max_train_rows else texts), unseen


def untruncated(tokenizer):
    """A copy of a fast tokenizer's backend that splits whole texts (a saved one may truncate)."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    return backend


def unseen_text_check(cfg: Config, tokenizer, trimmed, unseen: list) -> dict:
    """How the trimmed tokenizer splits unseen texts against the original: ShrinkbertError (one
    line) past the config's bounds, else the measured rates (for the manifest)."""
    before, after = (encode_all(untruncated(t), unseen) for t in (tokenizer, trimmed))
    tokens_before, tokens_after = sum(map(len, before)), sum(map(len, after))
    unk_before = sum(ids.count(tokenizer.unk_token_id) for ids in before)
    unk_rate = (sum(ids.count(trimmed.unk_token_id) for ids in after) - unk_before) / max(1, tokens_after)
    increase = tokens_after / max(1, tokens_before) - 1
    measured = {"unseen_texts": len(unseen), "unseen_unk_rate": round(unk_rate, 5),
                "unseen_token_increase": round(increase, 5)}
    if unk_rate > cfg.max_unseen_unk_rate or increase > cfg.max_unseen_token_increase:
        raise ShrinkbertError(
            f"trimming would hurt unseen text: on the {len(unseen)} held-out test texts {unk_rate:.2%} of tokens become "
            f"[UNK] (bound {cfg.max_unseen_unk_rate:.2%}) and they split into {increase:.1%} more tokens (bound "
            f"{cfg.max_unseen_token_increase:.1%}); keep the model's general vocabulary (skip trim-vocab) or raise "
            "--max-unseen-unk-rate/--max-unseen-token-increase")
    return measured


def encode_all(backend, texts) -> list[list[int]]:
    return [e.ids for e in backend.encode_batch(texts, add_special_tokens=True)]


def kept_ids(tokenizer, encodings: list[list[int]], cfg: Config) -> list[int]:
    vocab = tokenizer.get_vocab()
    keep = {i for ids in encodings for i in ids}
    keep |= set(tokenizer.all_special_ids)
    # Every added token too: a tokenizer may carry some that no special role names (MPNet's `<unk>`,
    # beside the `[UNK]` its WordPiece model uses), and tokenizer.json lists them by id.
    keep |= set(tokenizer.added_tokens_decoder)
    keep |= {vocab[t] for t in cfg.keep_tokens if t in vocab}
    if cfg.keep_ascii_chars:
        for ch in string.printable.strip():
            for tok in (ch, "##" + ch, ch.lower(), "##" + ch.lower()):
                if tok in vocab:
                    keep.add(vocab[tok])
    return sorted(keep)


def remap_tokenizer_files(out: Path, mapping: dict[int, int], new_vocab: dict[str, int]) -> None:
    tj_path = out / "tokenizer.json"
    tj = json.loads(tj_path.read_text())
    require(tj.get("model", {}).get("type") == "WordPiece",
            f"trim-vocab supports WordPiece (BERT) tokenizers, got {tj.get('model', {}).get('type')}")
    tj["model"]["vocab"] = new_vocab
    for added in tj.get("added_tokens", []):
        added["id"] = mapping[added["id"]]
    post = tj.get("post_processor") or {}
    processors = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    for proc in processors:
        if proc.get("type") == "TemplateProcessing":
            for spec in proc["special_tokens"].values():
                spec["ids"] = [mapping[i] for i in spec["ids"]]
        elif proc.get("type") in ("BertProcessing", "RobertaProcessing"):
            for key in ("cls", "sep"):
                proc[key] = [proc[key][0], mapping[proc[key][1]]]
    if tj.get("padding"):
        tj["padding"]["pad_id"] = mapping[tj["padding"]["pad_id"]]
    tj_path.write_text(json.dumps(tj, ensure_ascii=False, indent=2))
    tc_path = out / "tokenizer_config.json"
    if tc_path.is_file():
        tc = json.loads(tc_path.read_text())
        if "added_tokens_decoder" in tc:
            tc["added_tokens_decoder"] = {str(mapping[int(k)]): v for k, v in tc["added_tokens_decoder"].items()
                                          if int(k) in mapping}
        tc_path.write_text(json.dumps(tc, ensure_ascii=False, indent=2))
    ordered = sorted(new_vocab, key=new_vocab.get)
    (out / "vocab.txt").write_text("\n".join(ordered) + "\n", encoding="utf-8")


def shrink_embeddings(model, keep: list[int]) -> None:
    old = model.get_input_embeddings()
    index = torch.tensor(keep, dtype=torch.long)
    pad = model.config.pad_token_id
    new_pad = keep.index(pad) if pad is not None and pad in keep else None
    new = torch.nn.Embedding(len(keep), old.embedding_dim, padding_idx=new_pad)
    with torch.no_grad():
        new.weight.copy_(old.weight[index])
    model.set_input_embeddings(new)
    model.config.vocab_size = len(keep)
    model.config.pad_token_id = new_pad
    for role in ("sep_token_id", "cls_token_id", "bos_token_id", "eos_token_id"):  # a compact student finds a
        old_id = getattr(model.config, role, None)                                 # pair's texts by its separator
        if isinstance(old_id, int):
            setattr(model.config, role, keep.index(old_id) if old_id in keep else None)


def run(cfg: Config) -> Path:
    from transformers import AutoTokenizer

    require(bool(cfg.model) and bool(cfg.output_dir), "trim-vocab needs --model and --output-dir")
    require_stage(kind_for_stage(cfg.model, "trim-vocab"), "trim-vocab")
    model, tokenizer = load_pt(cfg.model)
    require(tokenizer.is_fast, "trim-vocab needs a fast tokenizer (tokenizer.json)")
    require(model.get_output_embeddings() is None,
            "trim-vocab handles classifiers; this model has a tied output (LM) head")
    spec = resolve_spec(cfg, [cfg.model], required=False)
    texts, unseen = corpus_texts(cfg, spec)
    encodings = encode_all(tokenizer.backend_tokenizer, texts)
    keep = kept_ids(tokenizer, encodings, cfg)
    mapping = {old: new for new, old in enumerate(keep)}
    id_to_token = {i: t for t, i in tokenizer.get_vocab().items()}
    new_vocab = {id_to_token[old]: new for old, new in mapping.items()}
    old_size, old_params = model.config.vocab_size, count_parameters(model)
    shrink_embeddings(model, keep)
    with atomic_artifact(cfg.output_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        remap_tokenizer_files(Path(tmp), mapping, new_vocab)
        trimmed = AutoTokenizer.from_pretrained(str(tmp), use_fast=True)
        check = encode_all(trimmed.backend_tokenizer, texts)
        for old_ids, new_ids in zip(encodings, check):
            if [mapping[i] for i in old_ids] != new_ids:
                raise ShrinkbertError("trimmed tokenizer splits a corpus text differently; "
                                      "this tokenizer is not plain WordPiece and cannot be trimmed safely")
        unseen_metrics = unseen_text_check(cfg, tokenizer, trimmed, unseen) if unseen else {}
        metrics = {"vocab_before": old_size, "vocab_after": len(keep), "vocab_ratio": round(len(keep) / old_size, 4),
                   "params_before": old_params, "params_after": count_parameters(model),
                   "corpus_texts": len(texts), "corpus_tokens": sum(len(e) for e in encodings),
                   "unk_tokens_in_corpus": sum(e.count(tokenizer.unk_token_id) for e in encodings),
                   "checked_identical_ids_on_corpus": True, **unseen_metrics}
        write_manifest(tmp, stage="trim-vocab", parents=[cfg.model], config=to_dict(cfg), metrics=metrics,
                       num_parameters=count_parameters(model), data=spec.record() if spec else None)
    return Path(cfg.output_dir)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
