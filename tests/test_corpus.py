"""`shrinkbert predict` / `predict_corpus`: every bundle kind over every input format equals its Predictor,
batching does not change an answer, a killed run resumes with every row exactly once, a Dask LocalCluster
gives the one-process table, and each bad input is one `error:` line with nothing written."""
from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures import NEGATIVE, NEUTRAL, POSITIVE, make_decisive, make_int8_embedding_graph, make_tiny_qa

import shrinkbert
from shrinkbert.cli import main as cli_main
from shrinkbert.deploy.corpus import MANIFEST
from shrinkbert.deploy.corpus_kinds import load_predictor

FAST = {"spin": "off", "threads": "1"}  # the bundle's runtime set, not timed
FORMATS = ("txt", "csv", "tsv", "jsonl", "parquet")
CONTEXT = ("The film was made in Paris in 1990 by a small crew. Its story follows a clever actor who loses "
           "his voice and finds it again in a quiet scene near the river.")


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = POSITIVE + NEGATIVE + NEUTRAL
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def write_rows(path: Path, rows: list[dict]) -> Path:
    """`rows` as a file of the format its suffix names (a .txt file: the "text" values, one a line)."""
    fmt = path.suffix[1:]
    if fmt == "txt":
        path.write_text("".join(r["text"] + "\n" for r in rows))
    elif fmt in ("csv", "tsv"):
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="," if fmt == "csv" else "\t",
                                    quoting=csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE)
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=7)
    return path


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    """A tiny bundle of each kind: sequence, token, qa, a graph embedder and a static embedder."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from shrinkbert.students.static import StaticEmbedder

    root = tmp_path_factory.mktemp("corpus-bundles")
    out = {}
    for kind, token in (("sequence", False), ("token", True)):
        model = make_decisive(root / kind, token=token)
        onnx = shrinkbert.export(model=str(model), output_dir=str(root / f"{kind}-onnx"), optimization="none",
                                 parity_rows=8)
        out[kind] = Path(shrinkbert.bundle(model=str(onnx), output_dir=str(root / f"{kind}-bundle"), parity_rows=8,
                                           **FAST))
    squad = root / "squad.json"
    questions = [("Where was the film made?", "Paris"), ("When was it made?", "1990"), ("Who loses his voice?", "actor")]
    articles = [{"title": f"t{t}", "paragraphs": [{"context": CONTEXT, "qas": [
        {"id": f"t{t}q{i}", "question": q, "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]}
        for i, (q, a) in enumerate(questions)]}]} for t in range(8)]
    squad.write_text(json.dumps({"version": "1.1", "data": articles}))
    onnx = shrinkbert.export(model=str(make_tiny_qa(root / "qa")), output_dir=str(root / "qa-onnx"),
                             optimization="none", parity_rows=4, task=str(squad), max_length=64)
    out["qa"] = Path(shrinkbert.bundle(model=str(onnx), output_dir=str(root / "qa-bundle"), parity_rows=4,
                                       max_length=64, **FAST))
    out["embedding"] = Path(shrinkbert.bundle(model=str(make_int8_embedding_graph(root / "emb")),
                                              output_dir=str(root / "emb-bundle"), **FAST))
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(set(POSITIVE + NEGATIVE + NEUTRAL)))}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    table = np.random.default_rng(0).normal(size=(len(vocab), 8)).astype(np.float32)
    StaticEmbedder(table, tokenizer).save(root / "static")
    out["static"] = Path(shrinkbert.bundle(model=str(root / "static"), output_dir=str(root / "static-bundle")))
    return out


def expected(bundle: Path, rows: list[dict]) -> list[dict]:
    """What the bundle's own Predictor returns for `rows`, one call, in order."""
    p = load_predictor(bundle, 1)
    if hasattr(p, "embed"):
        return [{"embedding": v} for v in p.embed([r["text"] for r in rows])]
    if p.kind == "qa":
        return [{"answer": p.answer(r["question"], r["context"])} for r in rows]
    if p.kind == "token":
        if "tokens" in rows[0]:
            return [{"words": w} for w in p.predict_words([r["tokens"] for r in rows])]
        return p.predict([r["text"] for r in rows])
    pairs = [r["text_pair"] for r in rows] if "text_pair" in rows[0] else None
    return [{**r, "scores": [r["scores"][name] for name in p.labels]} for r in p.predict([r["text"] for r in rows], pairs)]


def assert_same(got: list[dict], want: list[dict]) -> None:
    """Equal answers: strings and offsets exactly, floats within 1e-5 (batches pad differently); an int8
    graph's vectors within 2e-3, since dynamic int8 quantizes a batch's activations on the batch's own range."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for key, value in w.items():
            if key in ("embedding", "scores"):
                np.testing.assert_allclose(np.asarray(g[key], np.float32), np.asarray(value, np.float32),
                                           atol=2e-3 if key == "embedding" else 1e-5)
            elif key == "score":
                assert g[key] == pytest.approx(value, abs=1e-5)
            elif key in ("words", "entities", "answer"):
                items = [value] if key == "answer" else value
                mine = [g[key]] if key == "answer" else g[key]
                assert len(mine) == len(items)
                for m, i in zip(mine, items):
                    assert {k: v for k, v in m.items() if k != "score" and k in i} == \
                           {k: v for k, v in i.items() if k != "score"}
                    assert (m["score"] is None) == (i["score"] is None)
                    if i["score"] is not None:
                        assert m["score"] == pytest.approx(i["score"], abs=1e-5)
            elif key != "text":
                assert g[key] == value, key


def read(out: Path) -> list[dict]:
    return pq.read_table(out).to_pylist()


CASES = [(kind, fmt) for kind in ("sequence", "embedding", "static") for fmt in FORMATS] + \
        [("token", fmt) for fmt in FORMATS] + [("token-words", "jsonl"), ("token-words", "parquet")] + \
        [("qa", fmt) for fmt in ("csv", "jsonl", "parquet")] + [("pair", "csv"), ("pair", "parquet")]


@pytest.mark.parametrize("kind,fmt", CASES)
def test_every_kind_and_format_gives_what_the_predictor_gives(bundles, tmp_path, kind, fmt):
    texts = sentences(23, seed=len(kind) + len(fmt))
    if kind == "qa":
        rows = [{"question": q, "context": CONTEXT} for q in ("Where was it made?", "Who loses his voice?", "When?")]
    elif kind == "pair":
        rows = [{"text": a, "text_pair": b} for a, b in zip(texts, reversed(texts))]
    elif kind == "token-words":
        rows = [{"tokens": t.split()} for t in texts]
    else:
        rows = [{"text": t} for t in texts]
    bundle = bundles[{"token-words": "token", "pair": "sequence"}.get(kind, kind)]
    path = write_rows(tmp_path / f"in.{fmt}", rows)
    out = shrinkbert.predict_corpus(bundle, [str(path)], tmp_path / "out", progress=False, batch_tokens=96, window=10,
                                    shard_rows=9, text_pair_column="text_pair" if kind == "pair" else None)
    got = read(out)
    first_line = 2 if fmt in ("csv", "tsv") else 1
    assert [r["id"] for r in got] == [f"in.{fmt}:{first_line + i}" for i in range(len(rows))]
    assert_same(got, expected(bundle, rows))
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["complete"] and manifest["rows"] == len(rows)
    assert [s["first_row"] for s in manifest["shards"]] == list(range(0, len(rows), 9))


def test_the_id_column_globs_and_float16(bundles, tmp_path):
    texts = sentences(12)
    for part in range(2):
        write_rows(tmp_path / f"in-{part}.jsonl", [{"key": f"k{part}-{i}", "text": t} for i, t in enumerate(texts)])
    out = shrinkbert.predict_corpus(bundles["embedding"], str(tmp_path / "in-*.jsonl"), tmp_path / "out",
                                    id_column="key", dtype="float16", progress=False)
    table = pq.read_table(out)
    assert table.schema.field("embedding").type == pa.list_(pa.float16(), 32)
    assert table.column("id").to_pylist() == [f"k{p}-{i}" for p in range(2) for i in range(12)]
    want = load_predictor(bundles["embedding"], 1).embed(texts)
    np.testing.assert_allclose(np.asarray(table.column("embedding").to_pylist()[:12], np.float32), want, atol=2e-3)


def test_batching_changes_no_answer(bundles, tmp_path):
    path = write_rows(tmp_path / "in.txt", [{"text": t} for t in sentences(60)])
    one = read(shrinkbert.predict_corpus(bundles["sequence"], str(path), tmp_path / "a", batch_tokens=40, window=7,
                                         progress=False))
    other = read(shrinkbert.predict_corpus(bundles["sequence"], str(path), tmp_path / "b", batch_tokens=100000,
                                           window=1000, progress=False))
    assert [r["id"] for r in one] == [r["id"] for r in other]
    assert_same(one, [{k: r[k] for k in ("label", "score", "scores")} for r in other])


@pytest.mark.parametrize("kind", ["qa", "sequence", "token"])
def test_streams_side_by_side_give_the_answers_of_one(bundles, tmp_path, kind):
    # a row or two a batch, three calls at once: the answers come back to their rows, in input order
    if kind == "qa":
        rows = [{"question": q, "context": CONTEXT}
                for q in ("Where was the film made?", "Who loses his voice?", "When was it made?", "What?") * 6]
    else:
        rows = [{"text": t} for t in sentences(60, seed=7)]
    path = write_rows(tmp_path / "in.jsonl", rows)
    one = read(shrinkbert.predict_corpus(bundles[kind], str(path), tmp_path / "one", streams=1, threads=1,
                                         batch_tokens=16, window=30, progress=False))
    many = read(shrinkbert.predict_corpus(bundles[kind], str(path), tmp_path / "many", streams=3, threads=3,
                                          batch_tokens=16, window=30, progress=False))
    assert [r["id"] for r in many] == [r["id"] for r in one]
    assert_same(many, [{k: v for k, v in r.items() if k != "id"} for r in one])


def test_streams_count_tokens_side_by_side_as_one_stream_does(bundles):
    # a window's token counts, shared out over the streams, come back whole and in the rows' order
    from shrinkbert.deploy.corpus_batches import Streams
    from shrinkbert.deploy.corpus_kinds import LENGTH_ROWS, outputs_for

    rows = [{"text": t} for t in sentences(3 * LENGTH_ROWS + 17, seed=3)]
    rows[LENGTH_ROWS + 5]["text"] = " ".join(sentences(40, seed=4))  # past max_length: counted as truncated
    streams = Streams([outputs_for(load_predictor(bundles["sequence"], 1), None, None) for _ in range(3)])
    try:
        counted = streams.count(rows)
    finally:
        streams.close()
    alone = streams.first.count(rows)
    assert counted.lengths == alone.lengths
    assert [e.ids for e in counted.encodings] == [e.ids for e in alone.encodings]
    assert counted.lengths[LENGTH_ROWS + 5] == streams.first.predictor.max_length
    assert len(set(counted.lengths)) > 10  # rows of many lengths: a shuffled count would differ


@pytest.mark.parametrize("kind", ["sequence", "pair", "embedding"])
def test_counted_encodings_padded_feed_the_graph_what_encoding_again_feeds_it(bundles, kind):
    # the counting pass's encodings, padded, are the very inputs the Predictor's own encode gives the graph
    from shrinkbert.deploy.corpus_kinds import outputs_for, padded

    rows = [{"text": t, "text_pair": u} for t, u in zip(sentences(30, seed=5), sentences(30, seed=6))]
    rows[3]["text"] = " ".join(sentences(40, seed=7))  # truncated
    predictor = load_predictor(bundles["sequence" if kind == "pair" else kind], 1)
    outputs = outputs_for(predictor, None, "text_pair" if kind == "pair" else None)
    encodings = outputs.count(rows).encodings
    texts = [r["text"] for r in rows]
    if kind == "embedding":
        graph = predictor.graph
        mine, theirs = padded(encodings, graph.tokenizer), graph.tokenizer.encode_batch(texts)
        np.testing.assert_array_equal(graph.vectors(mine), graph.vectors(theirs))
    else:
        mine = padded(encodings, predictor.tokenizer)
        theirs = predictor.encode(list(zip(texts, [r["text_pair"] for r in rows])) if kind == "pair" else texts)
        for name, array in predictor.feed(theirs).items():
            np.testing.assert_array_equal(predictor.feed(mine)[name], array)
    assert [e.ids for e in mine] == [e.ids for e in theirs]
    assert [e.type_ids for e in mine] == [e.type_ids for e in theirs]
    got = outputs.predict(rows, outputs.count(rows).encodings)
    want = outputs.predict(rows)
    for name in want:
        assert got[name].equals(want[name]), name


def test_only_kinds_that_run_the_counted_encodings_are_handed_them(bundles):
    # a tagger and a QA bundle encode again (offsets, windows): their windows' encodings are not held for them
    from shrinkbert.deploy.corpus_kinds import outputs_for

    rows = [{"text": t, "question": "Who?", "context": CONTEXT} for t in sentences(20, seed=8)]
    outputs = {kind: outputs_for(load_predictor(bundles[kind], 1), None, None)
               for kind in ("sequence", "embedding", "token", "qa", "static")}
    held = {kind: each.count(rows) for kind, each in outputs.items()}
    assert held["sequence"].encodings is not None and held["embedding"].encodings is not None
    assert held["token"].encodings is None and held["qa"].encodings is None and held["static"].encodings is None
    tagger = outputs["token"]  # its rows still counted in tokens, for the length sort
    assert held["token"].lengths == [len(e.ids) for e in tagger.counter.encode_batch([r["text"] for r in rows])]


def predict_command(bundle: Path, path: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "shrinkbert", "predict", str(bundle), "--input", str(path), "--output", str(out),
            "--no-progress", "--shard-rows", "40", "--threads", "1", *extra]


def test_a_killed_run_resumes_with_every_row_exactly_once(bundles, tmp_path):
    path = write_rows(tmp_path / "in.txt", [{"text": t} for t in sentences(2400, seed=3)])
    reference = read(shrinkbert.predict_corpus(bundles["sequence"], str(path), tmp_path / "whole", shard_rows=40,
                                               threads=1, progress=False))
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(predict_command(bundles["sequence"], path, out), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:  # mid-shard: a few shards in, the next running
        if (out / MANIFEST).is_file() and len(json.loads((out / MANIFEST).read_text())["shards"]) >= 3:
            break
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    manifest = json.loads((out / MANIFEST).read_text())
    assert not manifest.get("complete"), "the run ended before the kill: give it more rows"
    # at a shard boundary: a shard renamed into place whose manifest entry was never written, and a temp shard
    (out / MANIFEST).write_text(json.dumps({**manifest, "shards": manifest["shards"][:-1]}))
    (out / ".part-00099.parquet.tmp").write_bytes(b"half a shard")
    done = subprocess.run(predict_command(bundles["sequence"], path, out), env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    got = read(out)
    assert [r["id"] for r in got] == [r["id"] for r in reference]
    assert len({r["id"] for r in got}) == 2400
    assert_same(got, [{k: r[k] for k in ("label", "score", "scores")} for r in reference])
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST] + [f"part-{i:05d}.parquet" for i in range(60)]
    again = subprocess.run(predict_command(bundles["sequence"], path, out), env=env, capture_output=True, text=True,
                           timeout=300)  # a complete run: nothing to do
    assert again.returncode == 0 and read(out) == got


def test_a_run_killed_before_its_first_shard_starts_again(bundles, tmp_path):
    path = write_rows(tmp_path / "in.txt", [{"text": t} for t in sentences(5)])
    out = tmp_path / "out"
    out.mkdir()
    (out / "._manifest.json.tmp").write_text("{")
    (out / ".part-00000.parquet.tmp").write_bytes(b"half")
    shrinkbert.predict_corpus(bundles["static"], str(path), out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "part-00000.parquet"]


def test_a_local_cluster_gives_the_one_process_table(bundles, tmp_path):
    path = write_rows(tmp_path / "in.csv", [{"text": t} for t in sentences(300, seed=5)])
    one = read(shrinkbert.predict_corpus(bundles["token"], str(path), tmp_path / "one", shard_rows=50,
                                         threads=1, progress=False))
    dask = read(shrinkbert.predict_corpus(bundles["token"], str(path), tmp_path / "dask", shard_rows=50,
                                          cluster="local:2", progress=False))
    assert [r["id"] for r in dask] == [r["id"] for r in one]
    assert_same(dask, [{k: r[k] for k in ("words", "entities")} for r in one])


def error_of(capsys, *args: str) -> str:
    assert cli_main(["predict", *args, "--no-progress"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_bad_inputs_are_one_line_each_and_write_nothing(bundles, tmp_path, capsys):
    seq, out = str(bundles["sequence"]), tmp_path / "out"
    good = write_rows(tmp_path / "good.txt", [{"text": "a good film"}])
    (tmp_path / "broken.parquet").write_bytes(b"not a parquet file")
    assert "cannot read" in error_of(capsys, seq, "--input", str(tmp_path / "broken.parquet"), "--output", str(out))
    assert "no file matches" in error_of(capsys, seq, "--input", str(tmp_path / "none-*.csv"), "--output", str(out))
    wrong = write_rows(tmp_path / "wrong.csv", [{"review": "a good film", "stars": 5}])
    line = error_of(capsys, seq, "--input", str(wrong), "--output", str(out))
    assert "'text'" in line and "review, stars" in line
    (tmp_path / "empty.txt").write_text("\n\n")
    assert "no rows" in error_of(capsys, seq, "--input", str(tmp_path / "empty.txt"), "--output", str(out))
    qa_line = error_of(capsys, str(bundles["qa"]), "--input", str(good), "--output", str(out))
    assert "'question'" in qa_line and "its columns: text" in qa_line
    assert "bundle" in error_of(capsys, str(tmp_path), "--input", str(good), "--output", str(out))
    assert "float16" in error_of(capsys, seq, "--input", str(good), "--output", str(out), "--dtype", "float16")
    assert "--streams" in error_of(capsys, seq, "--input", str(good), "--output", str(out), "--streams", "0")
    assert not out.exists()
    (tmp_path / "a-file").write_text("x")
    assert "is a file" in error_of(capsys, seq, "--input", str(good), "--output", str(tmp_path / "a-file"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert "holds other files" in error_of(capsys, seq, "--input", str(good), "--output", str(tmp_path / "other"))
    assert cli_main(["predict", seq, "--input", str(good), "--output", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert "another bundle" in error_of(capsys, str(bundles["token"]), "--input", str(good), "--output", str(out))
    assert "other options" in error_of(capsys, seq, "--input", str(good), "--output", str(out), "--shard-rows", "5")
    good.write_text("a changed file\n")
    assert "other inputs" in error_of(capsys, seq, "--input", str(good), "--output", str(out))
