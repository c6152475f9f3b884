"""Train a WordPiece tokenizer on text files or built-in corpora; save it as a BertTokenizerFast.

    python -m shrinkbert.teachers.tokenizer --corpus sotu,wordnet --vocab-size 8000 --output-dir runs/tok

The raw `tokenizers` model knows nothing of [CLS]/[SEP]; it is rebuilt here from its vocab.txt
as a transformers BertTokenizerFast, which carries BERT's post-processor, so encoding a sentence
(or a pair, with token_type_ids) gives [CLS] a [SEP] (b [SEP]) as the model expects.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from shrinkbert.core.artifacts import atomic_artifact, write_manifest
from shrinkbert.core.config import stage_main, to_dict
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.teachers.configs import TokenizerConfig as Config

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_tokenizer(lines: list[str], vocab_size: int = 8000, min_frequency: int = 2, lowercase: bool = True,
                    limit_alphabet: int = 1000, model_max_length: int = 512):
    """A BertTokenizerFast with a WordPiece vocabulary learnt from `lines`."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    if not lines:
        raise ShrinkbertError("the corpus holds no text to train a tokenizer on")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ShrinkbertError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    raw = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=lowercase)
    raw.train_from_iterator(lines, vocab_size=vocab_size, min_frequency=min_frequency,
                            limit_alphabet=limit_alphabet, special_tokens=SPECIAL_TOKENS, show_progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = raw.save_model(tmp)[0]
        # From vocab.txt (positional): transformers builds BERT's normalizer, pre-tokenizer and the
        # [CLS] $A [SEP] $B [SEP] post-processor; wrapping `raw` directly would add no specials.
        tokenizer = BertTokenizerFast(vocab_file, do_lower_case=lowercase, strip_accents=lowercase,
                                      model_max_length=model_max_length)
    if tokenizer("a")["input_ids"][0] != tokenizer.cls_token_id:
        raise RuntimeError("trained tokenizer adds no [CLS]: its post-processor is missing")
    return tokenizer


def run(cfg: Config) -> Path:
    from shrinkbert.core.data.load import load_corpus
    from shrinkbert.core.train import is_main_process

    out = Path(cfg.output_dir)
    if not is_main_process():  # tokenizer training is one process' work
        return out
    start = time.perf_counter()
    lines = load_corpus(cfg.corpus, max_lines=cfg.max_train_rows or None)
    tokenizer = train_tokenizer(lines, cfg.vocab_size, cfg.min_frequency, cfg.lowercase, cfg.limit_alphabet,
                                cfg.model_max_length)
    sample = lines[: min(len(lines), 2000)]
    words = sum(len(line.split()) for line in sample)
    pieces = sum(len(ids) - 2 for ids in tokenizer(sample)["input_ids"])
    metrics = {"vocab_size": len(tokenizer), "lines": len(lines), "train_time_s": time.perf_counter() - start,
               "pieces_per_word": pieces / max(words, 1),
               "unk_rate": sum(ids.count(tokenizer.unk_token_id) for ids in tokenizer(sample)["input_ids"]) / max(pieces, 1)}
    corpus_files = [c for c in cfg.corpus if Path(c).is_file()]
    with atomic_artifact(out) as tmp:
        tokenizer.save_pretrained(tmp)
        write_manifest(tmp, stage="tokenizer", parents=corpus_files, config=to_dict(cfg), metrics=metrics,
                       seed=cfg.seed, extra={"corpus": list(cfg.corpus)})
    print(f"tokenizer: {len(tokenizer)} tokens, {metrics['pieces_per_word']:.2f} pieces/word -> {out}")
    return out


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    sys.exit(main())
