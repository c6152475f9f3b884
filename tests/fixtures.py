"""Tiny, randomly initialised BERTs and tiny labelled data, for the tests (`from fixtures import ...`;
tests/ is on sys.path under pytest). Not part of the shipped package.

Real enough to exercise every code path (WordPiece tokenizer, save_pretrained layout,
shrinkbert.json), small enough that a whole stage runs in seconds on 2 cores.
"""
from __future__ import annotations

import csv
import importlib.util
import random
from pathlib import Path

POSITIVE = "good great fine superb lovely moving funny brilliant charming warm clever".split()
NEGATIVE = "bad awful dull boring poor weak tedious bland clumsy flat stupid".split()
NEUTRAL = "the a movie film plot story actor scene it was is and but very quite this".split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NOT_IN_A_BUNDLE = ("torch", "transformers", "optimum", "shrinkbert")  # what an edge bundle must run without
# The package's source rooms (top-level folders) and the dotted package each installs as
ROOMS = {"shrinkbert": "shrinkbert", "core": "shrinkbert.core", "teachers": "shrinkbert.teachers",
         "students": "shrinkbert.students", "compress": "shrinkbert.compress", "eval": "shrinkbert.eval",
         "deploy": "shrinkbert.deploy"}
REPO = Path(__file__).resolve().parents[1]


def source_modules() -> dict[str, Path]:
    """{dotted module name: its source file} of every room."""
    found = {}
    for folder, package in ROOMS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def load_bench(name: str):
    """bench/<name>.py as a module (bench/ is scripts, not a package), for tests of its plumbing."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def import_blocker(blocked: tuple[str, ...] = NOT_IN_A_BUNDLE) -> str:
    """Python source that makes every import of the `blocked` top-level packages fail in the fresh
    interpreter that runs it: a bundle's predict.py imported after it proves it needs none of them."""
    return f"""
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {tuple(blocked)!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, _Block())
"""


def tiny_vocab() -> list[str]:
    letters = list("abcdefghijklmnopqrstuvwxyz.,!?'")
    pieces = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    tokens = SPECIALS + sorted(set(POSITIVE + NEGATIVE + NEUTRAL)) + letters + pieces
    return list(dict.fromkeys(tokens))  # a duplicate would leave a hole in the vocabulary


def make_int8_embedding_graph(root: Path) -> Path:
    """A tiny encoder as a sentence-transformers folder (mean pooling, normalised), exported as one
    sentence-vector graph, then dynamic int8: root/int8."""
    import shrinkbert
    from shrinkbert.core.kinds.embedder import PoolingSpec, write_st_layout

    tiny = make_tiny_bert(root / "tiny", with_manifest=False)
    write_st_layout(tiny, PoolingSpec("mean", True), dim=32)
    shrinkbert.export(model=str(tiny), output_dir=str(root / "fp32"), optimization="none")
    shrinkbert.quantize(model=str(root / "fp32"), output_dir=str(root / "int8"))
    return root / "int8"


def make_tiny_qa(out: Path) -> Path:
    """A random 2-layer BertForQuestionAnswering with MiniLM's tokenizer (real words, not characters)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering

    from shrinkbert.core.builtin import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()), use_fast=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=512, num_labels=2)
    BertForQuestionAnswering(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def make_decisive(out_dir: Path, token: bool = False) -> Path:
    """A tiny BERT classifier (token=True: a TINY_TAGS tagger) whose biases are non-zero, as after
    training (calibration histograms and importance scores see real spreads), with a sharp classifier:
    logits far enough apart that labels are not ties, so int8 keeps them."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    path = (make_tiny_bert(out_dir, num_labels=len(TINY_TAGS), label_names=TINY_TAGS, token=True) if token
            else make_tiny_bert(out_dir))
    model = (AutoModelForTokenClassification if token else AutoModelForSequenceClassification).from_pretrained(path)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.add_(0.05 * torch.randn_like(param))
        model.classifier.weight.mul_(20.0)
    model.save_pretrained(path, safe_serialization=True)
    restamp(path)  # edited on purpose: a new artifact
    return path


def make_tiny_bert(out_dir: str | Path, num_labels: int = 2, hidden: int = 32, layers: int = 2,
                   heads: int = 4, intermediate: int = 64, seed: int = 0, with_manifest: bool = True,
                   label_names: list[str] | None = None, token: bool = False) -> Path:
    """Write a random-init BertForSequenceClassification (token=True: BertForTokenClassification)
    + fast tokenizer to out_dir."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertForTokenClassification, BertTokenizerFast

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_file = out_dir / "vocab.txt"
    vocab_file.write_text("\n".join(tiny_vocab()) + "\n")
    tokenizer = BertTokenizerFast(str(vocab_file), do_lower_case=True)
    label_names = label_names or (["negative", "positive"] if num_labels == 2 else [f"class{i}" for i in range(num_labels)])
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate,
                        max_position_embeddings=128, num_labels=num_labels,
                        id2label=dict(enumerate(label_names)), label2id={n: i for i, n in enumerate(label_names)})
    torch.manual_seed(seed)
    model = (BertForTokenClassification if token else BertForSequenceClassification)(config)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    if with_manifest:
        from shrinkbert.core.artifacts import write_manifest
        from shrinkbert.core.models import count_parameters

        write_manifest(out_dir, stage="tiny-init", config={"hidden": hidden, "layers": layers},
                       seed=seed, num_parameters=count_parameters(model))
    return out_dir


def tiny_sentences(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """Sentences whose label (1 positive, 0 negative) is set by the sentiment word they hold."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.sample(NEUTRAL, 4) + [rng.choice(POSITIVE if label else NEGATIVE)]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def write_tiny_csv(path: str | Path, n: int = 64, seed: int = 0) -> Path:
    path = Path(path)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for text, label in tiny_sentences(n, seed):
            writer.writerow([text, "positive" if label else "negative"])
    return path


TINY_TAGS = ["O", "B-POS", "I-POS", "B-NEG", "I-NEG"]


def tiny_tagged(n: int, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    """Sentences whose sentiment words are entities (B-POS/B-NEG, a following "very" is I-), the rest O:
    a tagging task a tiny model can learn."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words, tags = [], []
        for _ in range(rng.randint(3, 8)):
            pick = rng.random()
            if pick < 0.25:
                kind = rng.choice(["POS", "NEG"])
                words.append(rng.choice(POSITIVE if kind == "POS" else NEGATIVE))
                tags.append(f"B-{kind}")
                if rng.random() < 0.3:
                    words.append("very")
                    tags.append(f"I-{kind}")
            else:
                words.append(rng.choice(NEUTRAL))
                tags.append("O")
        rows.append((words, tags))
    return rows


def write_tiny_conll(path: str | Path, n: int = 64, seed: int = 0) -> Path:
    """A CoNLL-style file (token TAB tag, blank line between sentences) of tiny_tagged rows."""
    path = Path(path)
    with open(path, "w") as handle:
        for words, tags in tiny_tagged(n, seed):
            handle.write("".join(f"{w}\t{t}\n" for w, t in zip(words, tags)) + "\n")
    return path


def flipped_copy(model_dir: str | Path, out_dir: str | Path) -> Path:
    """A copy of a classifier artifact with its classifier negated, so every label it predicts flips:
    a reference that any agreement check must reject."""
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification

    out_dir = Path(out_dir)
    shutil.copytree(model_dir, out_dir)
    model = AutoModelForSequenceClassification.from_pretrained(out_dir)
    with torch.no_grad():
        model.classifier.weight.neg_()
        model.classifier.bias.neg_()
    model.save_pretrained(out_dir, safe_serialization=True)
    restamp(out_dir)
    return out_dir


def restamp(out_dir: str | Path) -> None:
    """A copied artifact edited on purpose is a new artifact: its manifest records its new files
    (else every stage refuses it, as core/verify.py should)."""
    import json

    from shrinkbert.core.artifacts import file_records

    out_dir = Path(out_dir)
    manifest_file = out_dir / "shrinkbert.json"
    if manifest_file.is_file():
        manifest = json.loads(manifest_file.read_text())
        manifest["files"] = file_records(out_dir)
        manifest_file.write_text(json.dumps(manifest, indent=2))


def run_cli(args: list[str], cwd: str | Path, timeout: int = 240, **env: str):
    """`python -m shrinkbert.cli ARGS` in a fresh process on one thread (env: extra variables)."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "shrinkbert.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **env}, timeout=timeout)


# The encoder families a user brings (docs/teachers.md): a tiny random model of each, made from its
# transformers config. BERT-style families read the tiny WordPiece vocabulary; RoBERTa gets a
# byte-level BPE and DeBERTa-v2 a Unigram (SentencePiece-style) tokenizer trained here on the tiny
# sentences, so the bundle's tokenizer.json runtime meets both.
FAMILY_MODELS = ("bert", "roberta", "distilbert", "deberta-v2", "electra", "mpnet", "modernbert")


def _family_tokenizer(family: str, out_dir: Path):
    from transformers import PreTrainedTokenizerFast

    texts = [text for text, _ in tiny_sentences(400)] + [" ".join(POSITIVE + NEGATIVE + NEUTRAL)]
    if family == "roberta":
        from tokenizers import ByteLevelBPETokenizer
        from transformers import RobertaTokenizerFast

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(texts, vocab_size=400, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        bpe.save_model(str(out_dir))
        return RobertaTokenizerFast(str(out_dir / "vocab.json"), str(out_dir / "merges.txt"))
    if family == "deberta-v2":
        from tokenizers import SentencePieceUnigramTokenizer

        unigram = SentencePieceUnigramTokenizer()
        unigram.train_from_iterator(texts, vocab_size=200, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"],
                                    unk_token="[UNK]")
        from tokenizers.processors import TemplateProcessing

        unigram.post_processor = TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", unigram.token_to_id("[CLS]")), ("[SEP]", unigram.token_to_id("[SEP]"))])
        return PreTrainedTokenizerFast(tokenizer_object=unigram._tokenizer, pad_token="[PAD]", cls_token="[CLS]",
                                       sep_token="[SEP]", unk_token="[UNK]", mask_token="[MASK]")
    from transformers import BertTokenizerFast

    vocab_file = out_dir / "vocab.txt"
    vocab_file.write_text("\n".join(tiny_vocab()) + "\n")
    return BertTokenizerFast(str(vocab_file), do_lower_case=True)


def make_tiny_family(out_dir: str | Path, family: str, num_labels: int = 2, hidden: int = 32, layers: int = 2,
                     heads: int = 4, intermediate: int = 64, seed: int = 0) -> Path:
    """A random-init <Family>ForSequenceClassification of `family` (a model_type in FAMILY_MODELS)
    with its tokenizer, as a user's teacher folder (no shrinkbert.json)."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _family_tokenizer(family, out_dir)
    labels = ["negative", "positive"] if num_labels == 2 else [f"class{i}" for i in range(num_labels)]
    common = dict(vocab_size=len(tokenizer), num_labels=num_labels, id2label=dict(enumerate(labels)),
                  label2id={n: i for i, n in enumerate(labels)}, pad_token_id=tokenizer.pad_token_id)
    if family == "distilbert":
        shape = dict(dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=intermediate, max_position_embeddings=128)
    else:
        shape = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=intermediate, max_position_embeddings=130)
    if family == "electra":
        shape["embedding_size"] = hidden
    if family == "modernbert":
        shape.update(global_attn_every_n_layers=2, local_attention=16, bos_token_id=tokenizer.cls_token_id,
                     eos_token_id=tokenizer.sep_token_id, cls_token_id=tokenizer.cls_token_id,
                     sep_token_id=tokenizer.sep_token_id)
    if family == "deberta-v2":
        shape.update(relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                     max_relative_positions=-1, type_vocab_size=0)
    if family == "roberta":
        shape.update(type_vocab_size=1, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config = AutoConfig.for_model(family, **common, **shape)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def make_tiny_mpnet(out_dir, hidden: int = 48):
    """A random-init MPNetModel whose vocabulary is the tiny BERT's renumbered as MPNet's is (<s> <pad> </s>
    <unk> first, <mask> last): the same pieces under other ids, as all-mpnet-base-v2 and all-MiniLM-L6-v2."""
    import torch
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + tiny_vocab() + ["<mask>"]
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = MPNetTokenizerFast(str(out_dir / "vocab.txt"), do_lower_case=True, unk_token="<unk>")
    torch.manual_seed(1)
    MPNetModel(MPNetConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=2 * hidden, max_position_embeddings=130, pad_token_id=1)
               ).save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir
