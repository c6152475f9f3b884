"""Extractive QA through every stage on a tiny random BERT and real SQuAD questions (../shared/data/squad):
finetune (start/end positions, best epoch by F1), distill (the teacher-output cache holding start and end
logits per token), prune, trim-vocab (refused where unseen contexts would suffer), export (parity on
start/end logits), quantize (scored on F1), the bundle (answer() equal to the int8 model's, torch
blocked) and the eval report (EM/F1 per question over all its windows).

One chain is built once per module (about 30 s on 2 cores); each test reads what it needs from it.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures import import_blocker, make_tiny_qa

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.artifacts import read_manifest

SQUAD_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad"
pytestmark = pytest.mark.skipif(not SQUAD_DIR.is_dir(), reason="../shared/data/squad is absent (it is on CI)")
MAX_LENGTH = 96  # several windows for most contexts, seconds per stage


def small_squad(path: Path, articles: int = 10, paragraphs: int = 2, per_paragraph: int = 2) -> Path:
    parsed = json.loads((SQUAD_DIR / "squad-dev-v1.1.json").read_text())
    data = [{"title": a["title"], "paragraphs": [{"context": p["context"], "qas": p["qas"][:per_paragraph]}
                                                 for p in a["paragraphs"][:paragraphs]]} for a in parsed["data"][:articles]]
    path.write_text(json.dumps({"version": parsed["version"], "data": data}))
    return path


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    import shrinkbert

    root = tmp_path_factory.mktemp("qa-stages")
    task = str(small_squad(root / "squad-small.json"))
    common = {"max_length": MAX_LENGTH}
    out = {"task": task, "root": root}
    out["teacher"] = shrinkbert.finetune(model=str(make_tiny_qa(root / "tiny")), task=task, epochs=2, batch_size=8,
                                         learning_rate=3e-3, output_dir=str(root / "teacher"), **common)
    out["student"] = shrinkbert.distill(teacher=out["teacher"], layers=1, epochs=1, batch_size=8, hidden_weight=1.0,
                                        attention_weight=1.0, hard_weight=0.5, output_dir=str(root / "student"),
                                        **common)
    out["pruned"] = shrinkbert.prune(model=out["student"], head_fraction=0.5, neuron_fraction=0.5, importance_rows=8,
                                     max_eval_rows=8, output_dir=str(root / "pruned"), **common)
    out["onnx"] = shrinkbert.export(model=out["teacher"], optimization="none", parity_rows=8,
                                    output_dir=str(root / "onnx"), **common)
    out["int8"] = shrinkbert.quantize(model=out["onnx"], max_eval_rows=16, output_dir=str(root / "int8"), **common)
    out["bundle"] = shrinkbert.bundle(model=out["int8"], parity_rows=6, output_dir=str(root / "bundle"), **common)
    return out


def test_finetune_trains_on_start_end_positions_and_keeps_the_best_f1_epoch(chain):
    metrics, manifest = chain["teacher"].metrics, chain["teacher"].manifest
    per_epoch = metrics["validation_f1_per_epoch"]
    assert len(per_epoch) == 2 and metrics["validation_f1"] == max(per_epoch)
    assert metrics["test_f1"] >= metrics["test_exact_match"] >= 0 and metrics["train_examples"] > 0
    assert manifest["config"]["max_length"] == MAX_LENGTH and manifest["data"]["label_names"] == ["start", "end"]
    assert metrics["train_loss"] < np.log(MAX_LENGTH)  # below a uniform guess over the window: it learned something


def test_distill_caches_the_teachers_start_and_end_logits(chain):
    record = chain["student"].manifest["student"]["teacher_outputs"]
    assert record["used"] and record["hidden_layers"] and record["attention_layers"]
    metrics = chain["student"].metrics
    assert metrics["teacher_test_f1"] == pytest.approx(chain["teacher"].metrics["test_f1"])
    assert "test_f1" in metrics and "retention" in metrics


def test_cached_teacher_outputs_equal_the_live_ones(chain):
    import torch

    from shrinkbert.core.data.dataspec import load_splits, resolve_spec
    from shrinkbert.core.data.load import tokenize_task
    from shrinkbert.core.kinds import kind_of
    from shrinkbert.core.models import load_model, load_tokenizer
    from shrinkbert.students.cache import compute_teacher_outputs
    from shrinkbert.students.distill_data import make_collate, with_row_index

    teacher_dir = chain["teacher"].path
    task, splits = load_splits(resolve_spec(type("C", (), {"task": ""})(), [teacher_dir]))
    kind = kind_of(task)
    model = load_model(kind.model_class(), teacher_dir).eval()
    tokenizer = load_tokenizer(teacher_dir)
    rows = with_row_index(tokenize_task(splits["train"].select(range(6)), tokenizer, task, MAX_LENGTH), kind)
    assert {"start_positions", "end_positions", "row_idx"} <= set(rows.column_names)
    collate = make_collate(tokenizer, kind.target_columns)
    cache = compute_teacher_outputs(model, rows, collate, batch_size=4, log=lambda *_: None, kind=kind)
    batch = collate([rows[i] for i in range(len(rows))])
    assert torch.equal(batch["start_positions"], torch.tensor(rows["start_positions"]))
    cached = kind.unpack_outputs(cache.lookup(batch["row_idx"], batch["input_ids"].shape[1])["logits"])
    with torch.no_grad():
        live = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     token_type_ids=batch["token_type_ids"])
    real = batch["attention_mask"].bool()
    for name in ("start_logits", "end_logits"):
        torch.testing.assert_close(cached[name][real], getattr(live, name)[real], atol=1e-4, rtol=1e-4)
    # the KD loss of the teacher against its own cached outputs is zero: the two line up token by token
    loss = kind.kd_loss({n: getattr(live, n) for n in kind.output_names}, cached, batch, temperature=2.0)
    assert float(loss) == pytest.approx(0.0, abs=1e-4)


def test_prune_removes_heads_and_neurons_of_a_qa_model(chain):
    metrics = chain["pruned"].metrics
    assert metrics["after"]["heads"] < metrics["before"]["heads"]
    assert metrics["after"]["intermediate_size"] < metrics["before"]["intermediate_size"]
    assert metrics["val_accuracy_before"] is not None  # a QA model's unit score: mean per-question F1 / 100


def test_trim_vocab_refuses_where_unseen_contexts_would_suffer_and_keeps_when_allowed(chain, tmp_path):
    import shrinkbert

    out = tmp_path / "trimmed"
    with pytest.raises(ShrinkbertError) as err:
        shrinkbert.trim_vocab(model=chain["teacher"], output_dir=str(out))
    message = str(err.value)
    assert "\n" not in message and "unseen" in message and "held-out test texts" in message
    assert not out.exists()
    kept = shrinkbert.trim_vocab(model=chain["teacher"], output_dir=str(out), max_unseen_unk_rate=1.0,
                                 max_unseen_token_increase=100.0)
    metrics = kept.metrics
    assert metrics["unseen_token_increase"] > 0.02 and metrics["vocab_after"] < metrics["vocab_before"]


def test_export_checks_parity_on_start_and_end_logits(chain):
    checks = {c["name"]: c for c in chain["onnx"].checks}
    assert checks["parity"]["passed"]
    metrics = chain["onnx"].metrics
    assert metrics["val_accuracy_torch"] == pytest.approx(metrics["val_accuracy_onnx"], abs=1e-6)


def test_quantize_is_judged_on_f1(chain):
    metrics = chain["int8"].metrics
    assert metrics["val_f1_fp32"] is not None and metrics["val_f1_int8"] is not None
    assert metrics["val_accuracy_fp32"] == pytest.approx(metrics["val_f1_fp32"] / 100)


def test_accuracy_aware_pairs_questions_by_f1(chain):
    from transformers import AutoTokenizer

    from shrinkbert.compress.accuracy_aware import loss_with_margin
    from shrinkbert.compress.common import align_labels, load_rows, ort_logits, ort_session
    from shrinkbert.core.data.dataspec import resolve_spec

    spec = resolve_spec(type("C", (), {"task": ""})(), [chain["int8"].path])
    rows, task = load_rows(spec, "validation", 8)
    tokenizer = AutoTokenizer.from_pretrained(str(chain["int8"].path))
    labels = align_labels(rows, task, {}, tokenizer, MAX_LENGTH)
    fp32 = ort_logits(ort_session(chain["onnx"].path), tokenizer, rows, MAX_LENGTH)
    int8 = ort_logits(ort_session(chain["int8"].path), tokenizer, rows, MAX_LENGTH)
    loss, se = loss_with_margin(fp32, int8, labels)
    f1 = labels.unit_scores(fp32), labels.unit_scores(int8)
    assert loss == pytest.approx(100 * float(np.mean(f1[0] - f1[1])))
    assert len(f1[0]) == len(rows)


BUNDLE_RUNNER = import_blocker() + r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from predict import Predictor
p = Predictor(sys.argv[1])
rows = json.loads(sys.argv[2])
print(json.dumps({"answers": [p.answer(r["question"], r["context"]) for r in rows],
                  "leaked": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))}))
"""


def test_bundle_answers_equal_the_int8_models_with_torch_blocked(chain, tmp_path):
    from transformers import AutoTokenizer

    from shrinkbert.compress.common import load_rows, ort_logits, ort_session
    from shrinkbert.core.data.dataspec import resolve_spec
    from shrinkbert.core.kinds import get_kind

    checks = {c["name"]: c["passed"] for c in chain["bundle"].checks}
    assert checks == {"parity": True, "predictions_identical": True}
    long_texts = read_manifest(chain["bundle"].path)["metrics"]["vs_source"]["long_texts"]
    # a context of about 2.5x max_length: its windows' tokens outnumber one window's
    assert long_texts["rows"] > MAX_LENGTH and long_texts["max_abs_logit_diff"] < 1e-3
    meta = json.loads((chain["bundle"].path / "labels.json").read_text())
    assert meta["kind"] == "qa" and meta["version_2_with_negative"] is False and meta["max_length"] == MAX_LENGTH
    spec = resolve_spec(type("C", (), {"task": ""})(), [chain["int8"].path])
    rows, task = load_rows(spec, "test", 6)
    rows.append({"id": "long", "title": "", "context": rows[0]["context"],
                 "question": "why " * 80 + rows[0]["question"], "answers": None})  # cut as the pipeline cuts it
    proc = subprocess.run([sys.executable, "-c", BUNDLE_RUNNER, str(chain["bundle"].path), json.dumps(rows)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["leaked"] == []
    kind = get_kind("qa")
    session, tokenizer = ort_session(chain["int8"].path), AutoTokenizer.from_pretrained(str(chain["int8"].path))
    for row, got in zip(rows, result["answers"]):
        labels = kind.gold_labels([row], task, None, tokenizer, MAX_LENGTH)
        want = labels.answers(ort_logits(session, tokenizer, [row], MAX_LENGTH))[0]
        assert (got["text"], got["start"], got["end"]) == (want["text"], want["start"], want["end"])
        assert got["score"] == (pytest.approx(want["score"], rel=1e-5) if want["score"] is not None else None)
        if got["start"] is not None:
            assert row["context"][got["start"]:got["end"]] == got["text"]
    assert sum(bool(got["text"]) for got in result["answers"]) >= len(rows) // 2  # real spans, not only "no span"


def test_predict_py_answers_a_question_about_a_context_file(chain, tmp_path):
    context = tmp_path / "context.txt"
    context.write_text("The Normans were the people who gave their name to Normandy, a region in France.")
    bundle = chain["bundle"].path
    done = subprocess.run([sys.executable, str(bundle / "predict.py"), "--question", "Who gave Normandy its name?",
                           "--context", str(context), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert context.read_text()[answer["start"]:answer["end"]] == answer["text"] and 0 < answer["score"] <= 1
    lines = json.dumps({"question": "Who gave Normandy its name?", "context": context.read_text()})
    piped = subprocess.run([sys.executable, str(bundle / "predict.py"), "--json"], input=lines + "\n",
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout) == answer
    missing = subprocess.run([sys.executable, str(bundle / "predict.py"), "--question", "Who?"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "--context" in missing.stderr


def test_eval_report_scores_every_variant_on_em_and_f1(chain, tmp_path):
    import shrinkbert

    artifacts = [chain[name] for name in ("teacher", "student", "onnx", "int8", "bundle")]
    data = shrinkbert.report(*artifacts, output_dir=str(tmp_path / "report"), memory="off", batch_sizes=[1],
                             seq_lens=["real"], runs=2, warmup=0, progress=False, plot=False)
    rows = {Path(v["path"]).name: v for v in data["variants"]}
    assert all(not v["error"] for v in rows.values()), {k: v["error"] for k, v in rows.items()}
    for variant in rows.values():
        assert set(variant["metrics"]) >= {"exact_match", "f1"} and variant["metrics"]["f1"] is not None
    # the ONNX export and the bundle answer as the teacher and the int8 model do, question by question
    assert rows["onnx"]["metrics"]["f1"] == pytest.approx(rows["teacher"]["metrics"]["f1"])
    assert rows["bundle"]["metrics"]["f1"] == pytest.approx(rows["int8"]["metrics"]["f1"])
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| EM | F1 |" in markdown and "extractive question answering" in markdown


def test_qa_stages_default_to_384_tokens_and_doc_stride_is_for_qa_only(tiny_csv):
    from transformers import AutoTokenizer

    from shrinkbert.core.builtin import minilm_path
    from shrinkbert.core.data.load import load_task, tokenize_task
    from shrinkbert.core.kinds import get_kind

    assert get_kind("qa").max_length(None) == 384 and get_kind("sequence").max_length(None) == 128
    assert get_kind("qa").max_length(200) == 200
    task, splits = load_task(str(tiny_csv))
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    with pytest.raises(ShrinkbertError, match="doc_stride is for tasks read in overlapping windows"):
        tokenize_task(splits, tokenizer, task, 64, doc_stride=16)


def test_squad_recipe_runs_end_to_end_in_miniature(tmp_path):
    """recipes/squad.yaml --quick, as tests/test_recipes_run.py runs the other recipes in miniature, but
    with a tiny QA model that has MiniLM's vocabulary (test_recipes_run's tiny BERT spells SQuAD's words
    letter by letter: a hundred windows per question) and 96-token windows."""
    import os

    from test_recipes_run import ROOT, miniature

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.recipe import load_recipe

    path = ROOT / "recipes" / "squad.yaml"
    recipe = load_recipe(path, quick=True)
    teacher = recipe.stages[0]
    assert teacher.params["model"] == "minilm" and teacher.params["task"] == "squad"  # from $SHRINKBERT_DATA
    tiny = make_tiny_qa(tmp_path / "tiny")
    sets = [a.split("=")[0] + f"={MAX_LENGTH}" if ".max_length=" in a else a for a in miniature(recipe, tiny)]
    sets += ["teacher.max_train_rows=32", "teacher.max_eval_rows=12", "student.max_train_rows=32",
             "report.max_eval_rows=12"]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--quick", "--output-dir", str(out)]
    for assignment in sets:
        cmd += ["--set", assignment]
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "recipe 'squad' finished in" in done.stdout and "stage times:" in done.stdout
    for stage in recipe.stages:
        if stage.uses == "eval":
            report = json.loads((out / stage.name / "report.json").read_text())
            assert len(report["variants"]) == 5 and all(not v["error"] for v in report["variants"])
            assert all(v["metrics"]["f1"] is not None for v in report["variants"])
            continue
        manifest = read_manifest(out / stage.name)
        assert manifest["stage"] == stage.uses and all(c["passed"] for c in manifest["checks"]), stage.name
        assert manifest["data"]["task"] == "squad"  # the name is recorded, and resolved again by each stage


def test_artifact_load_gives_the_qa_bundles_predictor(chain):
    from shrinkbert import Artifact
    from shrinkbert.compress.edge_predictor import Predictor

    predictor = Artifact(str(chain["bundle"])).load()  # a plain string, as docs/qa.md writes it
    assert isinstance(predictor, Predictor)
    context = "Normandy was named after the Normans."
    answer = predictor.answer("Who named Normandy?", context)
    assert answer["text"] == context[answer["start"]:answer["end"]] and answer["text"]
