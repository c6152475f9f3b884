"""The eval stage's options (the report).

Only the options live here: no heavy import, so `shrinkbert STAGE --help` and the Python API's help
answer at once. The stage modules (eval/harness.py) import their Config from here.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from shrinkbert.core.config import field, make_parser
from shrinkbert.core.configs import DataConfig, max_length_field

QUICK = {"batch_sizes": [1], "seq_lens": ["128", "real"], "runs": 8, "warmup": 2, "max_eval_rows": 200, "memory": "off"}


@dataclass
class EvalConfig(DataConfig):
    artifacts: list[str] = field([], "artifact directories to compare (also positional)")
    output_dir: str = field("runs/eval", "output directory for the report and the measurement cache (also --out)", group="output")
    baseline: str = field("", "the artifact (path or name) ratios are computed against; default: the teacher (the first "
                                 "fine-tuned artifact), else the first")
    split: str = field("test", "which stored split to measure on", choices=("train", "validation", "test"))
    max_eval_rows: int = field(0, "measure accuracy on the first N rows of the split only (0: all)", min=0)
    batch_sizes: list[int] = field([1, 8], "batch sizes to time (comma-separated)", min=1)
    seq_lens: list[str] = field(["128", "real"], "sequence lengths to time: integers and/or 'real'")
    runs: int = field(30, "timed calls per variant and case", min=1)
    warmup: int = field(5, "untimed warm-up calls per variant and case", min=0)
    threads: int = field(0, "threads for torch and ONNX Runtime (0: all cores); stated in the report", min=0)
    max_length: int | None = max_length_field()
    eval_batch_size: int = field(32, "batch size of the accuracy pass", min=1)
    torch_attention: str = field("eager", "attention implementation of PyTorch variants: eager or sdpa", choices=("eager", "sdpa"))
    torch_device: str = field("cpu", "where PyTorch variants run, scored and timed: cpu, or cuda (the first GPU; its "
                                     "name goes in the report; ONNX variants and bundles stay on the CPU, as they ship)",
                              choices=("cpu", "cuda"))
    memory: str = field("isolated", "memory: isolated (each variant alone in a process of its own: its timing "
                                    "worker, or under --timing inprocess a fresh process per variant, seconds "
                                    "each), inprocess (approximate), or off", choices=("isolated", "inprocess", "off"))
    timing: str = field("isolated", "latency: isolated (each variant in a worker process of its own, holding only its "
                                    "runtime: what a user's process sees) or inprocess (every variant in this process: "
                                    "quicker to start, threads and memory shared)",
                        choices=("isolated", "inprocess"))
    quick: bool = field(False, f"a fast look: {QUICK}")
    cache: bool = field(True, "reuse finished measurements from --out (keyed by artifact hash + settings)")
    progress: bool = field(True, "show progress bars")
    plot: bool = field(True, "draw pareto.png")
    floor: bool = field(True, "measure the host's int8 and fp32 matrix-product rates (a few seconds) and give each "
                              "variant's floor per case: its multiply-adds at that rate, and p50 / floor")
    strict: bool = field(False, "exit 1 when any artifact failed (default: only when all failed, exit 2)")
    title: str = field("", "report title")
    index_corpus: str = field("brown", "embeddings: corpus whose sentences make the drop-in index for recall@10 "
                                       "(pick one the students were not distilled on)")
    index_sentences: int = field(10000, "embeddings: sentences in the drop-in index", min=1)
    query_sentences: int = field(1000, "embeddings: query sentences (recall@10, agreement, throughput)", min=1)
    classify: str = field("movie-snippets,bbc-news", "embeddings: labelled tasks for MTEB's frozen-embedding classification "
                                                      "(logistic regression on each variant's vectors; '' for none)")
    retrieval: str = field("", "embeddings: a SQuAD JSON file (a path, or a name in $SHRINKBERT_DATA: squad) whose "
                               "paragraphs are searched with its questions (recall@1/@10, MRR@10 in the baseline's "
                               "index, drop-in, and in each variant's own; '' for none)")
    retrieval_questions: int = field(1000, "embeddings: questions sampled for --retrieval (200 with --quick)", min=1)
    nli: str = field("", "embeddings: a premise,hypothesis,label CSV (SNLI's; a path, or a name in $SHRINKBERT_DATA: "
                         "snli:test) whose entailed and contradicted pairs "
                         "each variant ranks by cosine (ROC AUC x100: similarity on another style of text than "
                         "STS-B's; '' for none)")
    nli_pairs: int = field(1000, "embeddings: pairs of each label read from --nli (300 with --quick)", min=1)
    retrieval_articles: str = field("all", "embeddings: the --retrieval articles searched: all | held-out (the half "
                                           "whose questions a SQuAD --corpus never gives a student: measure a student "
                                           "distilled on SQuAD questions here)", choices=("all", "held-out"))


# What one report reads and the other does not, by what the rows' models give (TaskKind.gives): a
# sentence-vector report (a scored-pairs task) times text -> vector at batch 1 in worker processes and
# writes no plot, floor or measurement cache; a logit report has no drop-in index, retrieval, NLI or
# frozen-vector classification. An option of the other report, set, is refused in one line
# (`unread_options`) instead of being ignored.
REPORT_UNREAD = {
    "sentence vectors": ("batch_sizes", "seq_lens", "eval_batch_size", "torch_attention", "torch_device", "memory",
                         "cache", "plot", "floor"),
    "logits": ("index_corpus", "index_sentences", "query_sentences", "classify", "retrieval", "retrieval_questions",
               "nli", "nli_pairs", "retrieval_articles"),
}


def unread_options(config: EvalConfig, gives: str) -> list[str]:
    """The options set away from their defaults (--quick's where it is on) that the report of models
    that give `gives` does not read."""
    from shrinkbert.core.config import options, unread_options as unread

    reads = {o.name for o in options(EvalConfig)} - set(REPORT_UNREAD[gives])
    return unread(config, reads, QUICK if config.quick else None)


def eval_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
    """The eval command line: the Config's flags, the artifacts also positional, --out for --output-dir."""
    parser = make_parser(EvalConfig, description, prog=prog)
    parser.add_argument("paths", nargs="*", metavar="ART", help="artifact directories to compare")
    parser.add_argument("--out", dest="output_dir", default=argparse.SUPPRESS, help="same as --output-dir")
    return parser
