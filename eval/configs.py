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


# What one report reads and the other does not, by what the rows' models give (TaskKind.gives): a
# sentence-vector report (a scored-pairs task) times text -> vector at batch 1 in worker processes and
# writes no plot, floor or measurement cache; a logit report has no drop-in index, retrieval, NLI or
# frozen-vector classification. Each report's own options sit in a --help section of their own; an option of the
# other report's section, set, is refused in one line (`unread_options`) instead of being ignored.
LOGIT_REPORT = "classifiers, taggers and QA: timing and accuracy"
VECTOR_REPORT = "sentence embeddings: STS, NLI, retrieval and the drop-in index"
REPORT_SECTIONS = {"logits": LOGIT_REPORT, "sentence vectors": VECTOR_REPORT}  # by what the kind's models give


@dataclass
class EvalConfig(DataConfig):
    artifacts: list[str] = field([], "artifact directories to compare (also positional)")
    output_dir: str = field("runs/eval", "output directory for the report and the measurement cache (also --out)", group="output")
    baseline: str = field("", "the artifact (path or name) ratios are computed against; default: the teacher (the first "
                                 "fine-tuned artifact), else the first")
    split: str = field("test", "which stored split to measure on", choices=("train", "validation", "test"))
    max_eval_rows: int = field(0, "measure accuracy on the first N rows of the split only (0: all)", min=0)
    batch_sizes: list[int] = field([1, 8], "batch sizes to time (comma-separated)", min=1, group=LOGIT_REPORT)
    seq_lens: list[str] = field(["128", "real"], "sequence lengths to time: integers and/or 'real'", group=LOGIT_REPORT)
    runs: int = field(30, "timed calls per variant and case", min=1)
    warmup: int = field(5, "untimed warm-up calls per variant and case", min=0)
    threads: int = field(0, "threads for torch and ONNX Runtime (0: all cores); stated in the report", min=0)
    max_length: int | None = max_length_field()
    eval_batch_size: int = field(32, "batch size of the accuracy pass", min=1, group=LOGIT_REPORT)
    torch_attention: str = field("eager", "attention implementation of PyTorch variants: eager or sdpa", choices=("eager", "sdpa"), group=LOGIT_REPORT)
    torch_device: str = field("cpu", "where PyTorch variants run, scored and timed: cpu, or cuda (the first GPU; its "
                                     "name goes in the report; ONNX variants and bundles stay on the CPU, as they ship)",
                              choices=("cpu", "cuda"), group=LOGIT_REPORT)
    memory: str = field("isolated", "memory: isolated (each variant alone in a process of its own: its timing "
                                    "worker, or under --timing inprocess a fresh process per variant, seconds "
                                    "each), inprocess (approximate), or off", choices=("isolated", "inprocess", "off"), group=LOGIT_REPORT)
    timing: str = field("isolated", "latency: isolated (each variant in a worker process of its own, holding only its "
                                    "runtime: what a user's process sees) or inprocess (every variant in this process: "
                                    "quicker to start, threads and memory shared)",
                        choices=("isolated", "inprocess"))
    quick: bool = field(False, f"a fast look: {QUICK}")
    cache: bool = field(True, "reuse finished measurements from --out (keyed by artifact hash + settings)", group=LOGIT_REPORT)
    progress: bool = field(True, "show progress bars")
    plot: bool = field(True, "draw pareto.png", group=LOGIT_REPORT)
    floor: bool = field(True, "measure the host's int8 and fp32 matrix-product rates (a few seconds) and give each "
                              "variant's floor per case: its multiply-adds at that rate, and p50 / floor", group=LOGIT_REPORT)
    strict: bool = field(False, "exit 1 when any artifact failed (default: only when all failed, exit 2)")
    title: str = field("", "report title")
    index_corpus: str = field("brown", "embeddings: corpus whose sentences make the drop-in index for recall@10 "
                                       "(pick one the students were not distilled on)", group=VECTOR_REPORT)
    index_sentences: int = field(10000, "embeddings: sentences in the drop-in index", min=1, group=VECTOR_REPORT)
    query_sentences: int = field(1000, "embeddings: query sentences (recall@10, agreement, throughput)", min=1, group=VECTOR_REPORT)
    classify: str = field("movie-snippets,bbc-news", "embeddings: labelled tasks for MTEB's frozen-embedding classification "
                                                      "(logistic regression on each variant's vectors; '' for none)", group=VECTOR_REPORT)
    retrieval: str = field("", "embeddings: a SQuAD JSON file (a path, or a name in $SHRINKBERT_DATA: squad) whose "
                               "paragraphs are searched with its questions (recall@1/@10, MRR@10 in the baseline's "
                               "index, drop-in, and in each variant's own; '' for none)", group=VECTOR_REPORT)
    retrieval_questions: int = field(1000, "embeddings: questions sampled for --retrieval (200 with --quick)", min=1, group=VECTOR_REPORT)
    nli: str = field("", "embeddings: a premise,hypothesis,label CSV (SNLI's; a path, or a name in $SHRINKBERT_DATA: "
                         "snli:test) whose entailed and contradicted pairs "
                         "each variant ranks by cosine (ROC AUC x100: similarity on another style of text than "
                         "STS-B's; '' for none)", group=VECTOR_REPORT)
    nli_pairs: int = field(1000, "embeddings: pairs of each label read from --nli (300 with --quick)", min=1, group=VECTOR_REPORT)
    documents: str = field("", "embeddings: a drop-in student's --corpus (distill --objective drop-in): its held-out "
                               "documents, never trained on, are searched with queries made from them, in the "
                               "baseline's index (drop-in) and each variant's own; give the distill stage's "
                               "--max-documents and --held-out-documents too ('' for none)", group=VECTOR_REPORT)
    max_documents: int = field(0, "embeddings: --documents' --max-documents, as distill was given it", min=0,
                               group=VECTOR_REPORT)
    held_out_documents: int = field(1000, "embeddings: --documents' --held-out-documents, as distill was given it",
                                    min=1, group=VECTOR_REPORT)
    retrieval_articles: str = field("all", "embeddings: the --retrieval articles searched: all | held-out (the half "
                                           "whose questions a SQuAD --corpus never gives a student: measure a student "
                                           "distilled on SQuAD questions here)", choices=("all", "held-out"), group=VECTOR_REPORT)


def unread_options(config: EvalConfig, gives: str) -> list[str]:
    """The options set away from their defaults (--quick's where it is on) that the report of models
    that give `gives` does not read."""
    from shrinkbert.core.config import options, unread_options as unread

    others = set(REPORT_SECTIONS.values()) - {REPORT_SECTIONS[gives]}
    reads = {o.name for o in options(EvalConfig) if o.group not in others}
    return unread(config, reads, QUICK if config.quick else None)


def eval_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
    """The eval command line: the Config's flags, the artifacts also positional, --out for --output-dir."""
    parser = make_parser(EvalConfig, description, prog=prog)
    parser.add_argument("paths", nargs="*", metavar="ART", help="artifact directories to compare")
    parser.add_argument("--out", dest="output_dir", default=argparse.SUPPRESS, help="same as --output-dir")
    return parser
