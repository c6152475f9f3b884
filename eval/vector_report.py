"""`shrinkbert eval` of models that give sentence vectors: one table, every variant on the same rows.

The eval stage (eval/harness.py) measures here the variants of a task whose kind's models give
sentence vectors (`TaskKind.gives`: scored pairs, STS-B's shape), and the logit-giving
kinds' variants in eval/measure.py and eval/report.py. For each artifact — a PyTorch embedding model
(minilm as it ships, a distilled student), an exported or int8 ONNX graph, a static student, a
bundle — it measures:

    spearman       the task's test Spearman of cosine x100 (MTEB's STS score; core/kinds/sts.py)
    of baseline    that score over the baseline's (the teacher: the first artifact unless --baseline)
    agreement      mean cosine of the variant's and the baseline's vectors of the same query sentences
    NLI AUC        --nli's entailed pairs ranked above its contradicted ones by cosine (ROC AUC x100,
                   eval/embedding_eval.nli_auc): similarity on another style of text
    recall@10      the drop-in test: the baseline's ten nearest neighbours among --index-sentences
                   sentences of --index-corpus (embedded by the baseline), found by the variant's query
                   vectors in that same index (only for variants in the baseline's vector space)
    p50/p90 ms     batch 1, a text of max_length tokens by the baseline's tokenizer (whole, so no
                   variant truncates it), text -> normalised vector (tokenizing included), each
                   variant in a worker process of its own holding only its runtime (a bundle runs its
                   own predict.py), timed in interleaved bursts like the classifier report
                   (eval.latency.measure_interleaved), so the machine's drift hits all alike;
                   --timing inprocess: every variant in the report's own process instead
    sentences/s    batch 32 over the query sentences (indexing throughput), in this process
    <task> acc     MTEB's classification protocol on frozen vectors for each --classify task: logistic
                   regression on 3 label-balanced samples of 256 train rows per label (of the first
                   2,000), accuracy on the first 1,000 test rows (500/300 with --quick)
    size MB        the files holding weights (.safetensors, .onnx, .npy)

Pick an --index-corpus the students were not distilled on (the recipe distils on imdb and WordNet
glosses and indexes Brown sentences): a sentence a student was trained on would flatter its recall.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Callable

import numpy as np

from shrinkbert.core.artifacts import is_artifact, read_manifest, write_files
from shrinkbert.core.errors import ShrinkbertError, environment_error
from shrinkbert.eval.encoders import open_encoder

WEIGHT_SUFFIXES = (".safetensors", ".onnx", ".npy")


def index_and_queries(corpus: str, index_size: int, query_size: int, seed: int) -> tuple[list[str], list[str]]:
    """Distinct sentences of `corpus` (3-60 words), shuffled with `seed`: the index, then the queries."""
    from shrinkbert.core.data.load import load_corpus

    lines = [line for line in dict.fromkeys(s.strip() for s in load_corpus(corpus)) if 3 <= len(line.split()) <= 60]
    random.Random(seed).shuffle(lines)
    if len(lines) < index_size + query_size:  # a small corpus: a fifth for queries, the rest the index
        query_size = min(query_size, max(1, len(lines) // 5))
        index_size = len(lines) - query_size
    return lines[:index_size], lines[index_size:index_size + query_size]


def baseline_tokenizer(path: str):
    """The baseline's `tokenizers.Tokenizer` (its tokenizer.json, or the named model's), or None."""
    from tokenizers import Tokenizer

    from shrinkbert.core.builtin import resolve_model

    folder = Path(path) if Path(path).is_dir() else Path(resolve_model(path))
    return Tokenizer.from_file(str(folder / "tokenizer.json")) if (folder / "tokenizer.json").is_file() else None


def timed_text(sentences: list[str], tokens: int, tokenizer=None) -> str:
    """A text of the test sentences' words that the baseline's tokenizer makes `tokens` tokens at most,
    [CLS] and [SEP] included, and as close to it as whole words allow: no variant truncates it, so
    every one (a static student does not truncate at all) embeds the same text whole. Without a
    tokenizer: `tokens` words, which truncation then cuts."""
    words = [word for sentence in sentences for word in sentence.split()]
    if not words:
        return ""
    words = (words * (tokens // len(words) + 1))[:tokens]
    if tokenizer is None:
        return " ".join(words)
    tokenizer.no_truncation()
    low, high = 0, len(words)  # the longest prefix of whole words that fits
    while low < high:
        middle = (low + high + 1) // 2
        if len(tokenizer.encode(" ".join(words[:middle])).ids) <= tokens:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


class TextInputs:
    """measure_interleaved's runner for a sentence embedder: the input is the text itself, which the
    variant's worker tokenizes and embeds (eval.worker's kind "embedding")."""

    def max_positions(self) -> None:
        return None

    def encode(self, texts, pairs=None, max_length=None, pad_to=None) -> dict:
        return {"texts": np.asarray(list(texts))}


class LocalEmbedder(TextInputs):
    """measure_interleaved's runner for an encoder already open in this process (--timing inprocess)."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray]):
        self.encode_texts = encode

    def forward(self, batch: dict) -> np.ndarray:
        return self.encode_texts([str(text) for text in batch["texts"]])


def time_in_process(encoders: dict[str, tuple[Callable[[list[str]], np.ndarray], str]], text: str, threads: int,
                    max_length: int, runs: int, warmup: int) -> tuple[dict[str, dict], dict[str, str]]:
    """time_in_workers' figures with every encoder in this process, as opened for the report's measures
    (ONNX Runtime's spinning off, since PyTorch shares the process): quicker to start, threads shared."""
    from shrinkbert.eval.latency import Case, measure_interleaved
    from shrinkbert.eval.measure import Settings

    timing, errors = Settings(), {}
    results = measure_interleaved(
        {name: LocalEmbedder(encode) for name, (encode, _) in encoders.items()}, Case(1, max_length), [text], None,
        max_length=max_length, warmup=warmup, runs=runs, burst=timing.burst, lead_in=timing.lead_in,
        on_error=lambda name, message: errors.setdefault(name, message))
    for name, stats in results.items():
        stats["timed_with"] = {"process": "shared", "runtime": encoders[name][1], "threads": threads,
                               "describe": "text -> vector"}
    return results, errors


def time_in_workers(specs: dict[str, dict], text: str, threads: int, max_length: int, runs: int,
                    warmup: int) -> tuple[dict[str, dict], dict[str, str]]:
    """({name: p50/p90/... ms, with "timed_with"}, {name: why it was not timed}) of embedding `text` at
    batch 1, each variant in a worker process of its own (eval.workers), interleaved in bursts like
    the classifier report (eval.measure.Settings' burst, lead-in and settle time)."""
    from shrinkbert.eval.latency import Case, measure_interleaved
    from shrinkbert.eval.measure import Settings
    from shrinkbert.eval.workers import start_workers

    timing = Settings()
    specs = {name: {**spec, "kind": "embedding", "options": {"max_length": max_length}} for name, spec in specs.items()}
    timers, errors = start_workers(specs, threads)
    try:
        results = measure_interleaved(
            {name: TextInputs() for name in timers}, Case(1, max_length), [text], None, max_length=max_length,
            warmup=warmup, runs=runs, burst=timing.burst, lead_in=timing.lead_in, settle_s=timing.settle_ms / 1000.0,
            timers=timers, on_error=lambda name, message: errors.setdefault(name, message))
        for name, stats in results.items():
            stats["timed_with"] = timers[name].timed_with
    finally:
        for timer in timers.values():
            timer.close()
    return results, errors


def size_mb(path: str) -> float | None:
    from shrinkbert.core.builtin import resolve_model

    folder = Path(path) if Path(path).is_dir() else Path(resolve_model(path))  # a name: its installed folder
    if not folder.is_dir():
        return None
    return sum(f.stat().st_size for f in folder.rglob("*") if f.suffix in WEIGHT_SUFFIXES) / 1e6


def measure_vectors(config, rows, artifacts: list[str], baseline: str | None) -> dict:
    """Measure every artifact and the baseline (the first artifact unless given; measured first where it
    is not among them, as a model name such as minilm may be); the report."""
    from shrinkbert.core.datafolder import data_file
    from shrinkbert.core.scored_pairs import ScoredPairs
    from shrinkbert.core.device import describe_machine, set_threads
    from shrinkbert.core.kinds.embedding import agreement
    from shrinkbert.eval.embedding_eval import drop_in_recall, nli_auc, read_nli_pairs, task_classification, throughput
    from shrinkbert.core.kinds.sts import sts_spearman
    from shrinkbert.core.progress import progress_bar

    threads = set_threads(config.threads or None)
    max_length = config.max_length or 128
    quick = config.quick
    runs, warmup = (8, 2) if quick else (config.runs, config.warmup)
    pairs = ScoredPairs(list(rows.texts), list(rows.pairs), np.asarray(rows.labels, dtype=np.float64))
    # a path or a name in the data folders of $SHRINKBERT_DATA ("squad", "snli:test"), resolved first so that a
    # name found nowhere fails before anything is measured; the report records the file read
    retrieval_file = data_file(config.retrieval, "--retrieval") if config.retrieval else None
    nli_file = data_file(config.nli, "--nli") if config.nli else None
    base = baseline or artifacts[0]
    if base not in artifacts:
        artifacts = [base, *artifacts]
    # {column label: task}: a built-in task's name, or a file's or folder's stem
    classify = {Path(name.strip()).stem: name.strip() for name in (config.classify or "").split(",") if name.strip()}
    train_rows, test_rows = (500, 300) if quick else (2000, 1000)
    index_texts, query_texts = index_and_queries(config.index_corpus, 500 if quick else config.index_sentences,
                                                 100 if quick else config.query_sentences, config.split_seed or 0)
    from shrinkbert.eval.retrieval import (gold_ranks, held_out_documents, paired_difference, read_squad_retrieval,
                                           scores_of)

    searches = {}  # metrics key -> a search (eval/retrieval.py): documents, queries and each query's gold document
    if retrieval_file:  # SQuAD paragraphs searched with its questions
        searches["retrieval"] = read_squad_retrieval(retrieval_file, 200 if quick else config.retrieval_questions,
                                                     config.split_seed or 0, max_articles=8 if quick else 0,
                                                     articles=config.retrieval_articles)
    if config.documents:  # a drop-in corpus's held-out documents searched with queries made from them
        searches["documents"] = held_out_documents(config.documents, config.max_documents, config.held_out_documents,
                                                   config.split_seed or 0)
    retrieval = searches.get("retrieval")
    base_searched: dict = {}  # key -> (the baseline's document vectors, its ranks)
    nli = read_nli_pairs(nli_file, 300 if quick else config.nli_pairs) if nli_file else None
    tokenizer = baseline_tokenizer(base)
    text = [timed_text(pairs.first + pairs.second, max_length, tokenizer)]
    variants, timed, opened = [], {}, {}
    in_process = config.timing == "inprocess"
    base_index = base_queries = None
    for path in progress_bar(artifacts, desc="vectors + accuracy", unit="variant", leave=False):
        name = Path(path).name or path
        entry = {"name": name, "path": str(path), "error": None, "metrics": {}}
        variants.append(entry)
        try:
            encode, entry["runtime"] = open_encoder(path, threads, max_length)
            metrics = entry["metrics"]
            metrics["spearman"] = sts_spearman(encode, pairs)
            if nli is not None:
                metrics["nli_auc"] = nli_auc(encode, *nli)
            queries = encode(query_texts)
            if path == base:
                base_index, base_queries = encode(index_texts), queries
            if base_queries is not None and queries.shape[1] == base_queries.shape[1]:
                metrics["agreement"] = agreement(queries, base_queries)
                if len(base_index) >= 10:
                    metrics["recall_at_10"] = drop_in_recall(base_index, base_queries, queries, 10)
            for key, search in searches.items():
                docs, asked = encode(search.paragraphs), encode(search.questions)
                if path == base:
                    base_searched[key] = (docs, gold_ranks(asked, docs, search.gold))
                    metrics[key] = {"teacher": scores_of(base_searched[key][1])}
                    continue
                metrics[key] = {"own": scores_of(gold_ranks(asked, docs, search.gold))}
                if key in base_searched and asked.shape[1] == base_searched[key][0].shape[1]:
                    drop_in = gold_ranks(asked, base_searched[key][0], search.gold)
                    metrics[key]["drop_in"] = scores_of(drop_in)
                    metrics[f"{key}_drop_in_vs_teacher"] = paired_difference(drop_in, base_searched[key][1])
            metrics["sentences_per_s_b32"] = throughput(encode, query_texts, 32)
            for label, task_name in classify.items():
                metrics[f"{label}_accuracy"] = task_classification(encode, task_name, train_rows, test_rows)
            metrics["size_mb"] = size_mb(path)
            metrics["dim"] = int(queries.shape[1])
            timed[name] = {"path": str(path), "manifest": read_manifest(Path(path)) if is_artifact(Path(path)) else {}}
            if in_process:  # kept open for the timing below
                opened[name] = (encode, entry["runtime"])
        except ShrinkbertError as err:
            entry["error"] = str(err)
        except Exception as err:  # one broken variant must not cost the others' figures (a full disk does)
            if environment_error(err):
                raise
            entry["error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    # Timed as deployed: each variant in a process of its own (this one only waits meanwhile), the
    # text -> vector call, tokenizing included; or all in this one (--timing inprocess).
    if in_process:
        latency, untimed = time_in_process(opened, text[0], threads, max_length, runs, warmup)
    else:
        latency, untimed = time_in_workers(timed, text[0], threads, max_length, runs, warmup)
    base_name = Path(base).name or base
    base_metrics = next(v["metrics"] for v in variants if v["name"] == base_name)
    for entry in variants:
        if entry["error"]:
            continue
        metrics = entry["metrics"]
        if base_metrics.get("spearman"):
            metrics["of_baseline"] = metrics["spearman"] / base_metrics["spearman"]
        if base_metrics.get("nli_auc") and metrics.get("nli_auc") is not None:
            metrics["nli_of_baseline"] = metrics["nli_auc"] / base_metrics["nli_auc"]
        if entry["name"] not in latency:
            entry["note"] = f"not timed: {untimed.get(entry['name'], 'its worker gave no figures')}"
            continue
        stats = latency[entry["name"]]
        metrics.update(p50_ms=stats["p50"], p90_ms=stats["p90"])
        entry["timed_with"] = stats["timed_with"]
        if base_name in latency:
            metrics["speedup_p50"] = latency[base_name]["p50"] / stats["p50"]
    report = {"title": config.title or "Sentence embeddings", "kind": "embedding", "machine": describe_machine(),
              "threads": threads, "baseline": base_name, "test_pairs": len(pairs.first), "max_length": max_length,
              "index": {"corpus": config.index_corpus, "sentences": len(index_texts), "queries": len(query_texts)},
              "classify": {"tasks": list(classify), "sources": list(classify.values()), "train_rows": train_rows,
                           "test_rows": test_rows, "per_label": 256, "experiments": 3},
              "latency": {"batch": 1, "tokens": len(tokenizer.encode(text[0]).ids) if tokenizer else None,
                          "max_length": max_length, "runs": runs, "warmup": warmup,
                          "process": "shared" if in_process else "own",
                          "other_cpu_cores": next((stats.get("other_cpu_cores") for stats in latency.values()), None)},
              "nli": ({"file": str(nli_file), "pairs": len(nli[2])} if nli is not None else None),
              "retrieval": ({"file": str(retrieval_file), "articles": config.retrieval_articles,
                             "paragraphs": len(retrieval.paragraphs),
                             "questions": len(retrieval.questions)} if retrieval is not None else None),
              "documents": ({"corpus": config.documents, "max_documents": config.max_documents,
                             "held_out_documents": config.held_out_documents,
                             "paragraphs": len(searches["documents"].paragraphs),
                             "questions": len(searches["documents"].questions)} if "documents" in searches else None),
              "variants": variants, "cache": {"hits": 0, "dir": "", "enabled": False}}
    report["markdown"] = to_markdown(report)
    return report


def write_vector_report(report: dict, out_dir) -> dict:
    """report.md and report.json into out_dir; {kind: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"markdown": out / "report.md", "json": out / "report.json"}
    write_files({files["markdown"]: report["markdown"],
                 files["json"]: json.dumps({k: v for k, v in report.items() if k != "markdown"}, indent=2)})
    return files


def _cell(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def to_markdown(report: dict) -> str:
    tasks = report.get("classify", {}).get("tasks", [])
    nli = report.get("nli")
    lines = [f"# {report['title']}", "",
             f"Machine: {report['machine']}; {report['threads']} threads. STS test: {report['test_pairs']} pairs. "
             f"Drop-in index: {report['index']['sentences']} {report['index']['corpus']} sentences embedded by "
             f"{report['baseline']}, {report['index']['queries']} queries. Latency: batch 1, a "
             f"{report['latency']['tokens'] or report['max_length']}-token text (by {report['baseline']}'s tokenizer, "
             f"whole: no variant truncates it), text to vector, "
             + ("every variant in the report's own process (--timing inprocess), "
                if report["latency"].get("process") == "shared" else "each variant in a process of its own, ")
             + f"{report['latency']['runs']} timed calls in interleaved bursts"
             + (f"; other processes kept {report['latency']['other_cpu_cores']} cores busy meanwhile"
                if report['latency'].get('other_cpu_cores') is not None else "") + ".", "",
             "| variant | runtime | STS Spearman | of baseline | " + ("NLI AUC | of baseline | " if nli else "")
             + "recall@10 | agreement | "
             + "".join(f"{task} acc | " for task in tasks) + "p50 ms | p90 ms | speed-up | sentences/s b32 | dim | size MB |",
             "|---|---|--:|--:|" + ("--:|--:|" if nli else "") + "--:|--:|" + "--:|" * len(tasks)
             + "--:|--:|--:|--:|--:|--:|"]
    for entry in report["variants"]:
        m = entry["metrics"]
        if entry["error"]:
            lines.append(f"| {entry['name']} | failed: {entry['error']} |" + " |" * (10 + len(tasks) + (2 if nli else 0)))
            continue
        lines.append(f"| {entry['name']} | {entry['runtime']} | {_cell(m.get('spearman'), '.2f')} | "
                     f"{_cell(m.get('of_baseline'), '.1%')} | "
                     + (f"{_cell(m.get('nli_auc'), '.2f')} | {_cell(m.get('nli_of_baseline'), '.1%')} | " if nli else "")
                     + f"{_cell(m.get('recall_at_10'), '.3f')} | "
                     f"{_cell(m.get('agreement'), '.3f')} | "
                     + "".join(f"{_cell(m.get(f'{task}_accuracy'), '.1f')} | " for task in tasks)
                     + f"{_cell(m.get('p50_ms'), '.2f')} | "
                     f"{_cell(m.get('p90_ms'), '.2f')} | {_cell(m.get('speedup_p50'), '.1f')}x | "
                     f"{_cell(m.get('sentences_per_s_b32'), '.0f')} | {m.get('dim', '–')} | "
                     f"{_cell(m.get('size_mb'), '.1f')} |")
    lines += ["", "recall@10 and agreement are measured only for variants in the baseline's vector space "
                  "(a student with its own --dim has neither)."]
    if nli:
        lines += [f"NLI AUC: {nli['pairs']} pairs of {Path(nli['file']).name} (entailed and contradicted, neutral left "
                  "out) ranked by cosine, ROC AUC x100: the chance an entailed pair is the closer one."]
    lines += [f"- {entry['name']}: {entry['note']}" for entry in report["variants"] if entry.get("note")]
    lines += retrieval_markdown(report)
    lines += retrieval_markdown(report, "documents")
    if tasks:
        c = report["classify"]
        lines += ["", f"<task> acc: MTEB's classification protocol on frozen vectors: logistic regression on "
                      f"{c['experiments']} label-balanced samples of {c['per_label']} rows per label from the first "
                      f"{c['train_rows']} train rows, accuracy x100 on the first {c['test_rows']} test rows, mean of the "
                      "samples."]
    return "\n".join(lines) + "\n"


def retrieval_markdown(report: dict, key: str = "retrieval") -> list[str]:
    """A search's table (eval/retrieval.py; key "retrieval": SQuAD's, "documents": a drop-in corpus's
    held-out documents): each variant's settings, 95% bootstrap intervals over queries, and recall as a
    share of the baseline's own."""
    info = report.get(key)
    if not info:
        return []
    base = next((v["metrics"].get(key, {}).get("teacher") for v in report["variants"]
                 if v["name"] == report["baseline"] and not v["error"]), None)

    def cell(scores: dict, name: str) -> str:
        value = scores[name]
        return f"{value['value']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"

    def share(scores: dict, name: str) -> str:
        return f"{scores[name]['value'] / base[name]['value']:.1%}" if base and base[name]["value"] else "–"

    held_out = " of the held-out articles" if info.get("articles") == "held-out" else ""
    heading = (f"## Retrieval: {info['questions']} questions searching {info['paragraphs']} paragraphs{held_out} "
               f"({Path(info['file']).name})" if key == "retrieval" else
               f"## Drop-in on the corpus: {info['questions']} queries searching its {info['paragraphs']} held-out "
               f"documents ({info['corpus']})")
    lines = ["", heading, "",
             "teacher: the baseline's questions in its own index; drop-in: the variant's questions in the "
             "baseline's index; own: the variant's questions in its own index. 95% bootstrap intervals over "
             "questions; \"of teacher\" is the share of the baseline's own figure.", "",
             "| variant | setting | recall@1 | recall@10 | MRR@10 | recall@1 of teacher | recall@10 of teacher |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for entry in report["variants"]:
        for setting, scores in (entry["metrics"].get(key) or {}).items():
            lines.append(f"| {entry['name']} | {setting.replace('_', '-')} | {cell(scores, 'recall_at_1')} | "
                         f"{cell(scores, 'recall_at_10')} | {cell(scores, 'mrr_at_10')} | "
                         f"{share(scores, 'recall_at_1')} | {share(scores, 'recall_at_10')} |")
    paired = [(entry["name"], entry["metrics"][f"{key}_drop_in_vs_teacher"]) for entry in report["variants"]
              if entry["metrics"].get(f"{key}_drop_in_vs_teacher")]
    if paired:
        def points(value: dict) -> str:
            return f"{value['value']:+.1f} [{value['low']:+.1f}, {value['high']:+.1f}]"
        lines += ["", "Drop-in minus teacher on the same questions, in points, with a paired 95% bootstrap interval:", "",
                  "| variant | recall@1 | recall@10 |", "|---|--:|--:|"]
        lines += [f"| {name} | {points(diff['recall_at_1'])} | {points(diff['recall_at_10'])} |" for name, diff in paired]
    return lines
