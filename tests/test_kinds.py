"""The task kinds (core/kinds): one module per kind, stages that never name one, both kinds' interface."""
from __future__ import annotations

import re
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertForTokenClassification

from shrinkbert.core.data.tasks import Task
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.kinds import TaskKind, all_kinds, get_kind, kind_of, kind_of_rows
from fixtures import TINY_TAGS, make_tiny_bert

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("shrinkbert", "teachers", "students", "compress", "eval", "deploy", "core", "bench")


def _stage_sources() -> list[Path]:
    """Every Python file of the kit outside the kinds' own package (and the tests)."""
    files = []
    for room in ROOMS:
        files += [f for f in (ROOT / room).rglob("*.py") if "kinds" not in f.relative_to(ROOT).parts[:2]]
    return sorted(files)


def _kind_branches(text: str) -> list[str]:
    """Lines that ask which kind a thing is instead of asking the kind."""
    names = "|".join(re.escape(n) for n in all_kinds())
    patterns = [r"\bis_token\w*", r"ForTokenClassification",
                rf"""(==|!=)\s*["']({names})["']""", rf"""["']({names})["']\s*(==|!=)""",
                rf"""\bin\s*[(\[{{]\s*["']({names})["']"""]
    return [line.strip() for line in text.splitlines()
            if any(re.search(p, line) for p in patterns) and not line.strip().startswith("#")]


def test_no_module_outside_the_kinds_branches_on_a_kind():
    files = _stage_sources()
    assert len(files) > 60 and ROOT / "students" / "distill.py" in files  # the scan sees the tree
    found = {str(f.relative_to(ROOT)): hits for f in files if (hits := _kind_branches(f.read_text(encoding="utf-8")))}
    assert not found, f"branches on a task kind outside core/kinds (ask the kind instead): {found}"


# Stages that run one code path for every kind: none hands a kind's models to code of
# their own through the kinds (the retired `own_stages`); what differs follows what the kind's models
# give (`gives`: logits or sentence vectors), as in bundle and eval (distill: `sentence_vectors`).
ONE_PATH_STAGES = {"eval": "eval/harness.py", "distill": "students/distill.py", "finetune": "teachers/finetune.py",
                   "export": "compress/export.py", "prune": "compress/prune.py", "quantize": "compress/quantize.py",
                   "sparsify": "compress/sparsify.py", "trim-vocab": "compress/trim_vocab.py",
                   "bundle": "compress/bundle.py"}


@pytest.mark.parametrize("stage", sorted(ONE_PATH_STAGES))
def test_one_path_stages_have_no_escape_hatch(stage):
    source = (ROOT / ONE_PATH_STAGES[stage]).read_text(encoding="utf-8")
    assert "own_stage" not in source, f"{ONE_PATH_STAGES[stage]} hands some kind's models to code of its own"
    assert not re.search(r"^\s*(from|import)\s+[\w.]*embedding", source, re.M), \
        f"{ONE_PATH_STAGES[stage]} imports the embedding kind's code"
    owners = [name for name, kind in all_kinds().items() if hasattr(kind, "own_stages")]
    assert not owners, f"kinds that still name stage code of their own: {owners}"


def test_the_branch_finder_finds_branches():
    """The guard above would catch the branches this refactor removed."""
    assert _kind_branches('    if task.kind == "token" and self.pair:')
    assert _kind_branches('    token = any(a.endswith("ForTokenClassification") for a in archs)')
    assert _kind_branches("        if rows.is_token:")
    assert _kind_branches("    if 'sequence' != kind:")
    assert not _kind_branches('    if target.kind == "fraction":')  # other kinds of "kind" are not task kinds
    assert not _kind_branches("    # a kind == 'token' comment")


def test_every_kind_gives_what_the_bundle_and_the_report_take():
    """The bundle and eval stages pick their parts by what a kind's models give: every answer has them."""
    from shrinkbert.compress.bundle import PARTS
    from shrinkbert.eval.configs import REPORT_SECTIONS
    from shrinkbert.eval.harness import REPORTS

    for kind in all_kinds().values():
        assert kind.gives in PARTS and kind.gives in REPORTS and kind.gives in REPORT_SECTIONS, kind
    assert set(PARTS) == set(REPORTS) == set(REPORT_SECTIONS)


def test_registry_finds_every_kind_module():
    kinds = all_kinds()
    assert list(kinds)[0] == "sequence" and "token" in kinds
    modules = {p.stem for p in (ROOT / "core" / "kinds").glob("*.py")}
    homes = [type(k).__module__.rsplit(".", 1)[-1] for k in kinds.values()]
    assert set(homes) <= modules and len(set(homes)) == len(homes)  # each kind in a module of its own
    for name, kind in kinds.items():
        assert isinstance(kind, TaskKind) and kind.name == name and get_kind(name) is kind
    with pytest.raises(ShrinkbertError, match="unknown task kind 'poetry'"):
        get_kind("poetry")
    with pytest.raises(ShrinkbertError, match="kind must be one of sequence, "):
        Task("t", ("a", "b"), kind="poetry")


def test_kind_of_reads_tasks_manifests_models_and_directories(tmp_path):
    token, sequence = get_kind("token"), get_kind("sequence")
    ner = Task("ner", ("O", "B-X", "I-X"), metrics=("seqeval",), kind="token")
    assert kind_of(ner) is token and kind_of(Task("s", ("a", "b"))) is sequence and kind_of(None) is sequence
    assert kind_of({"task": ner.to_dict()}) is token and kind_of({"kind": "token"}) is token
    assert kind_of({"architectures": ["BertForTokenClassification"]}) is token
    assert kind_of({"architectures": ["BertForMaskedLM"]}) is sequence  # no kind's model: the default
    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    assert kind_of(BertForTokenClassification(config)) is token
    assert kind_of(BertForSequenceClassification(config)) is sequence
    tagger = make_tiny_bert(tmp_path / "tagger", num_labels=5, label_names=TINY_TAGS, token=True)
    assert kind_of(tagger) is token and kind_of(str(tagger)) is token
    with pytest.raises(ShrinkbertError, match="cannot tell the task kind"):
        kind_of(str(tmp_path / "missing"))
    assert kind_of_rows([{"tokens": ["a"], "tags": None}]) is token
    assert kind_of_rows([{"text": "a", "text_pair": None, "label": None}]) is sequence


def test_each_kind_checks_its_task_declaration():
    with pytest.raises(ShrinkbertError, match="a token task cannot be a pair task"):
        Task("t", ("O", "B-X"), pair=True, kind="token")
    with pytest.raises(ShrinkbertError, match="seqeval scores token tasks only"):
        Task("t", ("a", "b"), metrics=("seqeval",))
    with pytest.raises(ShrinkbertError, match="unknown metric"):
        Task("t", ("a", "b"), metrics=("bleu",))
    assert Task("t", ("O", "B-X"), metrics=("seqeval", "accuracy"), kind="token").kind == "token"


def test_both_kinds_name_their_classes_and_export_task():
    for kind, suffix, task in ((get_kind("sequence"), "ForSequenceClassification", "text-classification"),
                               (get_kind("token"), "ForTokenClassification", "token-classification")):
        assert kind.model_class().__name__ == f"AutoModel{suffix}"
        assert kind.ort_class().__name__ == f"ORTModel{suffix}"
        assert kind.export_task == task
        assert kind.matches_architectures([f"Bert{suffix}"]) and not kind.matches_architectures(["BertForMaskedLM"])
        path = kind.bundle_module_path()
        assert path.is_file()  # the bundle's postprocessing is torch-free: it imports no torch or shrinkbert
        source = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(torch|transformers|shrinkbert)", source, re.M)


def test_primary_metrics_and_report_columns():
    sequence, token = get_kind("sequence"), get_kind("token")
    seq_task = Task("s", ("a", "b"), metrics=("f1", "accuracy"))
    ner = Task("n", ("O", "B-X", "I-X"), metrics=("seqeval", "accuracy"), kind="token")
    pos = Task("p", ("NOUN", "VERB"), metrics=("accuracy",), kind="token")
    assert sequence.primary_metric(seq_task) == ("accuracy", "accuracy")
    assert sequence.report_metric(seq_task) == ("f1", "f1")  # the report leads with the first declared metric
    assert token.primary_metric(ner) == ("entity_f1", "entity F1") == token.report_metric(ner)
    assert token.primary_metric(pos) == ("accuracy", "word accuracy")
    assert [c[0] for c in token.metric_columns(ner)] == ["entity_f1", "entity_precision", "entity_recall",
                                                         "word_accuracy"]
    assert sequence.metric_columns(seq_task) == [("f1", "f1", "f1"), ("accuracy", "accuracy", "accuracy")]


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    return AutoTokenizer.from_pretrained(str(tiny_bert))


def test_sequence_kind_rows_encoding_gold_labels_and_losses(tokenizer):
    kind = get_kind("sequence")
    task = Task("s", ("negative", "positive"))
    split = datasets.Dataset.from_dict({"text": ["good film", "bad film"], "label": [1, 0]})
    rows = kind.rows(split, task)
    assert rows == [{"text": "good film", "text_pair": None, "label": 1}, {"text": "bad film", "text_pair": None,
                                                                           "label": 0}]
    encoded = kind.encode(tokenizer, rows, 16)
    assert encoded["input_ids"].shape[0] == 2
    assert kind.gold_labels(rows, task, {0: "positive", 1: "negative"}) == [0, 1]  # mapped by name
    assert kind.gold_labels(kind.example_rows(["x"]), task, None) == [None]
    logits = np.array([[0.1, 2.0], [3.0, 0.0]])
    assert kind.scored_logits(logits, encoded, rows) is not None
    assert kind.score(task, logits, [1, 1]) == {"accuracy": 0.5}
    with pytest.raises(ShrinkbertError, match="token classifier needs word rows"):
        kind.scored_logits(np.zeros((2, 4, 2)), encoded, rows)
    student = {"logits": torch.tensor([[0.0, 1.0], [1.0, 0.0]], requires_grad=True)}
    batch = {"labels": torch.tensor([1, -100])}  # the second row: a teacher-labelled transfer row
    assert kind.kd_loss(student, {"logits": student["logits"].detach()}, batch, 2.0).item() == pytest.approx(0, abs=1e-6)
    hard = kind.hard_loss(student, batch)
    assert hard.item() == pytest.approx(torch.nn.functional.cross_entropy(student["logits"][:1], batch["labels"][:1]).item())
    assert kind.hard_loss(student, {"labels": torch.tensor([-100, -100])}).item() == 0.0


def test_token_kind_scores_words_on_first_subtokens(tokenizer):
    kind = get_kind("token")
    task = Task("n", tuple(TINY_TAGS), metrics=("seqeval", "accuracy"), kind="token")
    split = datasets.Dataset.from_dict({"tokens": [["good", "film"], ["a", "dull", "plot"]],
                                        "tags": [[1, 0], [0, 3, 0]]})
    rows = kind.rows(split, task)
    assert kind.texts(split) == ["good film", "a dull plot"]
    encoded = kind.encode(tokenizer, rows, 16)
    raw = np.random.default_rng(0).normal(size=(2, encoded["input_ids"].shape[1], len(TINY_TAGS)))
    scored = kind.scored_logits(raw, encoded, rows)
    labels = kind.gold_labels(rows, task, None, tokenizer, 16)
    assert scored.shape == (5, len(TINY_TAGS)) and list(labels) == [1, 0, 0, 3, 0] and labels.counts == [2, 3]
    scores = kind.score(task, scored, labels)
    assert set(scores) == {"accuracy", "entity_precision", "entity_recall", "entity_f1"}
    assert kind.score(task, np.eye(len(TINY_TAGS))[[1, 0, 0, 3, 0]], labels)["entity_f1"] == 1.0
    with pytest.raises(ShrinkbertError, match="cannot tag words"):
        kind.scored_logits(np.zeros((2, len(TINY_TAGS))), encoded, rows)
    tokenized = kind.tokenize(split, tokenizer, task, 16)
    assert all(sum(label != -100 for label in row) == len(words) for row, words in
               zip(tokenized["labels"], split["tokens"]))
    # KD compares the labelled words only: a difference at an ignored position costs nothing
    labels_t = torch.tensor([[-100, 1, -100]])
    student = {"logits": torch.zeros(1, 3, len(TINY_TAGS))}
    teacher = {"logits": torch.zeros(1, 3, len(TINY_TAGS))}
    teacher["logits"][0, 2] = 5.0
    assert kind.kd_loss(student, teacher, {"labels": labels_t}, 2.0).item() == pytest.approx(0, abs=1e-6)
    assert kind.collate_labels([[1, 2]], 4) == [[1, 2, -100, -100]]
