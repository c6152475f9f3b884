"""teachers/: masking, NSP pairs, tokenizer training, tiny pretraining and fine-tuning, bad input, resume."""
import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fixtures import tiny_sentences

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(text for text, _ in tiny_sentences(600, seed=1)) + "\n")
    return path


@pytest.fixture()
def cache(tmp_path):
    return str(tmp_path / "cache")


# ------------------------------------------------------------------------------------------------
# Masking and NSP pairs


def test_masking_statistics(tokenizer):
    from shrinkbert.core.masking import Masker

    masker = Masker(tokenizer, 0.15)
    gen = torch.Generator().manual_seed(0)
    rows, width = 400, 128
    ids = masker.random_ids[torch.randint(len(masker.random_ids), (rows, width), generator=gen)]
    lengths = torch.randint(20, width, (rows,), generator=gen)
    ids[:, 0] = tokenizer.cls_token_id
    for r, n in enumerate(lengths.tolist()):
        ids[r, n] = tokenizer.sep_token_id
        ids[r, n + 1:] = tokenizer.pad_token_id
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
    masked, labels = masker(ids, torch.Generator().manual_seed(1))

    selected = labels != -100
    assert not (selected & special).any(), "a special or padding token was selected"
    assert torch.equal(masked[special], ids[special])
    assert torch.equal(labels[selected], ids[selected])
    assert selected.sum() / (~special).sum() == pytest.approx(0.15, abs=0.01)
    n = selected.sum()
    to_mask = (masked == tokenizer.mask_token_id) & selected
    kept = (masked == ids) & selected
    randomised = selected & ~to_mask & ~kept
    assert to_mask.sum() / n == pytest.approx(0.8, abs=0.02)
    assert randomised.sum() / n == pytest.approx(0.1, abs=0.02)
    assert kept.sum() / n == pytest.approx(0.1, abs=0.02)
    assert not torch.isin(masked[randomised], torch.tensor(tokenizer.all_special_ids)).any()
    assert (masked[~selected] == ids[~selected]).all()


def test_masking_is_seeded(tokenizer):
    from shrinkbert.core.masking import Masker

    masker = Masker(tokenizer)
    ids = masker.random_ids[torch.randint(len(masker.random_ids), (8, 32))]
    a = masker(ids, torch.Generator().manual_seed(5))
    b = masker(ids, torch.Generator().manual_seed(5))
    c = masker(ids, torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


def test_nsp_pairs_and_segments(tokenizer):
    from shrinkbert.teachers.pretrain import nsp_pairs, pair_examples

    lines = [f"line number {i}" for i in range(400)]
    pairs = nsp_pairs(lines, seed=0)
    assert len(pairs) == 399
    assert sum(label for _, _, label in pairs) / len(pairs) == pytest.approx(0.5, abs=0.08)
    for i, (a, b, label) in enumerate(pairs):
        assert a == lines[i]
        assert (b == lines[i + 1]) == (label == 0) and b != a
    examples = pair_examples(["good movie", "bad plot", "the film"], tokenizer, max_length=32, seed=0)
    ids, segments = examples["input_ids"][0], examples["token_type_ids"][0]
    assert ids[0] == tokenizer.cls_token_id and ids.count(tokenizer.sep_token_id) == 2
    first_sep = ids.index(tokenizer.sep_token_id)
    assert set(segments[: first_sep + 1]) == {0} and set(segments[first_sep + 1:]) == {1}
    assert examples["next_sentence_label"] == [label for _, _, label in nsp_pairs(["good movie", "bad plot", "the film"], 0)]


# ------------------------------------------------------------------------------------------------
# Tokenizer


def test_tokenizer_training_adds_cls_sep(corpus_file, tmp_path):
    from transformers import AutoTokenizer

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import tokenizer as stage

    assert stage.main(["--corpus", str(corpus_file), "--vocab-size", "120", "--min-frequency", "1",
                       "--output-dir", str(tmp_path / "tok")]) == 0
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert type(tok).__name__ == "BertTokenizerFast" and len(tok) <= 120
    enc = tok("a good movie", "a bad plot")
    assert enc["input_ids"][0] == tok.cls_token_id and enc["input_ids"][-1] == tok.sep_token_id
    assert enc["input_ids"].count(tok.sep_token_id) == 2 and enc["token_type_ids"][-1] == 1
    assert tok.convert_ids_to_tokens(tok("good")["input_ids"]) == ["[CLS]", "good", "[SEP]"]
    manifest = read_manifest(tmp_path / "tok")
    assert manifest["stage"] == "tokenizer" and manifest["metrics"]["vocab_size"] == len(tok)
    assert manifest["parents"][0]["path"] == str(corpus_file)


# ------------------------------------------------------------------------------------------------
# Pretraining


def test_tiny_pretrain_lowers_mlm_loss(tiny_bert, corpus_file, tmp_path):
    from transformers import AutoModelForMaskedLM

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import pretrain

    out = tmp_path / "mlm"
    cfg = pretrain.Config(output_dir=str(out), preset="micro", tokenizer=str(tiny_bert), corpus=[str(corpus_file)],
                          max_length=32, epochs=8, batch_size=16, learning_rate=3e-3, log_every=5,
                          heldout_fraction=0.1, checkpoint_every=20)
    pretrain.run(cfg)
    metrics = read_manifest(out)["metrics"]
    assert metrics["heldout_mlm_loss_after"] < metrics["heldout_mlm_loss_before"] - 0.5
    curve = metrics["mlm_loss_curve"]
    assert len(curve) >= 5 and curve[-1][1] < curve[0][1]
    assert len(metrics["heldout_mlm_loss_per_epoch"]) == 8
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert model.config.hidden_size == 32 and (out / "vocab.txt").is_file()
    assert not pretrain_ckpt(out).exists()


def pretrain_ckpt(out):
    from shrinkbert.core.train import checkpoint_dir_for

    return checkpoint_dir_for(out)


def test_pretrain_nsp_static_and_continued_head_warmup(tiny_bert, corpus_file, tmp_path):
    """NSP + static masking from a model without an MLM head (the tiny classifier): head warm-up first."""
    from transformers import AutoModelForMaskedLM, BertForPreTraining

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import pretrain

    out = tmp_path / "mlm-nsp"
    assert pretrain.main(["--model", str(tiny_bert), "--corpus", str(corpus_file), "--nsp", "--masking", "static",
                          "--max-length", "32", "--max-steps", "12", "--head-warmup-steps", "4",
                          "--batch-size", "8", "--checkpoint-every", "5", "--output-dir", str(out)]) == 0
    manifest = read_manifest(out)
    metrics = manifest["metrics"]
    assert metrics["head_warmup"]["steps"] == 4 and metrics["steps"] == 12
    assert 0 <= metrics["heldout_nsp_accuracy_after"] <= 1
    assert manifest["parents"][0]["path"] == str(tiny_bert)
    assert BertForPreTraining.from_pretrained(out).config.architectures == ["BertForPreTraining"]
    AutoModelForMaskedLM.from_pretrained(out)


def test_head_warmup_freezes_the_encoder(tiny_bert, corpus_file, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from shrinkbert.teachers import pretrain

    import shrinkbert.core.train as core_train
    phases = []
    real_train = core_train.train

    def spy(model, *args, **kwargs):
        before = {k: v.clone() for k, v in model.state_dict().items()}
        metrics = real_train(model, *args, **kwargs)
        phases.append({k for k, v in model.state_dict().items() if not torch.equal(v, before[k])})
        return metrics

    monkeypatch.setattr(core_train, "train", spy)
    pretrain.run(pretrain.Config(output_dir=str(tmp_path / "m"), model=str(tiny_bert), corpus=[str(corpus_file)],
                                 max_length=32, max_steps=2, head_warmup_steps=3, batch_size=8, checkpoint_every=0))
    head_phase, full_phase = phases
    assert head_phase and all(k.startswith("cls.") for k in head_phase)
    assert any(k.startswith("bert.encoder") for k in full_phase)
    initial = load_file(tiny_bert / "model.safetensors")
    assert "cls.predictions.transform.dense.weight" not in initial  # the head really was new


# ------------------------------------------------------------------------------------------------
# Fine-tuning


def _accuracy_on_csv(model_dir, csv_path, pair=False):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(csv_path) as handle:
        rows = list(csv.DictReader(handle))
    enc = tok([r["text"] for r in rows], [r["text_pair"] for r in rows] if pair else None,
              padding=True, return_tensors="pt")
    with torch.no_grad():
        preds = model(**enc).logits.argmax(-1).tolist()
    return sum(model.config.id2label[p] == r["label"] for p, r in zip(preds, rows)) / len(rows)


def test_tiny_finetune_learns(tiny_bert, tiny_csv, tmp_path, cache):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import finetune

    out = tmp_path / "teacher"
    assert finetune.main(["--model", str(tiny_bert), "--task", str(tiny_csv), "--epochs", "20", "--batch-size", "8",
                          "--learning-rate", "3e-3", "--cache-dir", cache, "--output-dir", str(out)]) == 0
    manifest = read_manifest(out)
    metrics = manifest["metrics"]
    assert manifest["stage"] == "finetune" and manifest["parents"][0]["path"] == str(tiny_bert)
    assert {"validation_accuracy", "test_accuracy", "train_time_s"} <= set(metrics)
    assert len(metrics["validation_accuracy_per_epoch"]) == 20
    assert metrics["validation_accuracy"] == max(metrics["validation_accuracy_per_epoch"])
    assert _accuracy_on_csv(out, tiny_csv) > 0.8
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"} and config["label2id"]["positive"] == 1
    assert not pretrain_ckpt(out).exists()


def test_sentence_pair_finetune(tiny_bert, tmp_path, cache):
    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.teachers import finetune

    rng = random.Random(0)
    data = tmp_path / "pairs.csv"
    with open(data, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "label"])
        for (a, _), (b, label_b) in zip(tiny_sentences(120, 2), tiny_sentences(120, 3)):
            writer.writerow([a, b, "positive" if label_b else "negative"])  # the label lives in the second text
    out = tmp_path / "pair-teacher"
    assert finetune.main(["--model", str(tiny_bert), "--task", str(data), "--text-column", "premise",
                          "--text-pair-column", "hypothesis", "--epochs", "12", "--batch-size", "8",
                          "--learning-rate", "3e-3", "--cache-dir", cache, "--output-dir", str(out),
                          "--keep", "final"]) == 0
    manifest = read_manifest(out)
    assert manifest["task"]["pair"] is True
    assert manifest["metrics"]["validation_accuracy"] == manifest["metrics"]["validation_accuracy_per_epoch"][-1]
    AutoModelForSequenceClassification.from_pretrained(out)
    with open(data) as handle:
        rows = [{"text": r["premise"], "text_pair": r["hypothesis"], "label": r["label"]} for r in csv.DictReader(handle)]
    flat = tmp_path / "flat.csv"
    with open(flat, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["text", "text_pair", "label"])
        writer.writeheader()
        writer.writerows(rows)
    assert _accuracy_on_csv(out, flat, pair=True) > 0.7


# ------------------------------------------------------------------------------------------------
# Bad input and the stage front


@pytest.mark.parametrize("args, message", [
    (["--task", "no/such/file.csv"], "file.csv"),
    (["--label-column", "sentiment"], "sentiment"),
    (["--model", "NOT_A_MODEL"], "not a model directory"),
])
def test_bad_input_is_one_clear_line(args, message, tiny_bert, tiny_csv, tmp_path, cache, capsys):
    from shrinkbert.teachers import finetune

    (tmp_path / "NOT_A_MODEL").mkdir()
    defaults = {"--model": str(tiny_bert), "--task": str(tiny_csv)}
    args = [str(tmp_path / a) if a == "NOT_A_MODEL" else a for a in args]
    for flag, value in defaults.items():
        if flag not in args:
            args += [flag, value]
    code = finetune.main(args + ["--cache-dir", cache, "--output-dir", str(tmp_path / "out"), "--epochs", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("error: ") and message in err[-1], err[-1]
    assert not (tmp_path / "out").exists()


def test_pretrain_bad_input(tmp_path, capsys, tiny_bert):
    from shrinkbert.teachers import pretrain

    assert pretrain.main(["--output-dir", str(tmp_path / "o"), "--corpus", "sotu"]) == 2
    assert "needs --tokenizer" in capsys.readouterr().err
    assert pretrain.main(["--tokenizer", str(tiny_bert), "--corpus", str(tmp_path / "missing.txt"),
                          "--output-dir", str(tmp_path / "o")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert pretrain.main(["--tokenizer", str(tiny_bert), "--preset", "huge", "--output-dir", str(tmp_path / "o")]) == 2
    assert "--preset must be one of" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["shrinkbert.teachers.tokenizer", "shrinkbert.teachers.pretrain", "shrinkbert.teachers.finetune"])
def test_help_lists_every_knob(module, capsys):
    import importlib

    stage = importlib.import_module(module)
    with pytest.raises(SystemExit) as exit_info:
        stage.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--output-dir" in text and "--seed" in text
    if module != "shrinkbert.teachers.tokenizer":
        assert all(flag in text for flag in ("--learning-rate", "--grad-accum-steps", "--checkpoint-every",
                                             "--mixed-precision", "--max-steps", "--warmup-ratio"))


# ------------------------------------------------------------------------------------------------
# Several processes and resume, through the real command line


def _finetune_cmd(tiny_bert, data, out, cache, extra=()):
    return ["-m", "shrinkbert.teachers.finetune", "--model", str(tiny_bert), "--task", str(data), "--cache-dir", cache,
            "--output-dir", str(out), "--batch-size", "4", "--learning-rate", "1e-3", *extra]


def test_finetune_under_accelerate_launch_two_processes(tiny_bert, tiny_csv, tmp_path, cache):
    from shrinkbert.core.artifacts import read_manifest

    out = tmp_path / "ddp"
    from conftest import free_port

    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()),
           *_finetune_cmd(tiny_bert, tiny_csv, out, cache, ["--epochs", "2"])]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_manifest(out)["metrics"]
    assert metrics["num_processes"] == 2
    assert metrics["steps"] == 2 * -(-metrics["train_examples"] // 8)  # 4 rows x 2 processes per step


def test_keep_best_restores_the_best_epochs_weights_across_a_resume(tiny_bert, tiny_csv, tmp_path, cache, monkeypatch):
    """Validation scores are scripted (0.9, 0.5, then the run dies, then 0.6 after the resume): the
    artifact must hold the weights the model had when it scored 0.9, in epoch 1 of the first process."""
    import hashlib

    from safetensors.torch import load_file

    from shrinkbert.teachers import finetune

    def weights_hash(state: dict) -> str:
        digest = hashlib.sha256()
        for name in sorted(state):
            digest.update(name.encode() + state[name].detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    script, weights_at_validation = [0.9, 0.5, "kill", 0.6], []
    real_score = finetune.score_split

    def scripted_score(model, dataset, *args, **kwargs):
        if not script:  # the test pass after training: the real thing
            return real_score(model, dataset, *args, **kwargs)
        weights_at_validation.append(weights_hash(model.state_dict()))
        step = script.pop(0)
        if step == "kill":
            raise KeyboardInterrupt  # the process dies during epoch 3's validation
        return {"accuracy": step, "loss": 0.5}

    monkeypatch.setattr(finetune, "score_split", scripted_score)
    args = ["--model", str(tiny_bert), "--task", str(tiny_csv), "--epochs", "3", "--batch-size", "8",
            "--learning-rate", "1e-3", "--checkpoint-every", "1", "--cache-dir", cache, "--keep", "best",
            "--output-dir", str(tmp_path / "teacher")]
    with pytest.raises(KeyboardInterrupt):
        finetune.main(args)
    assert len(weights_at_validation) == 3 and not (tmp_path / "teacher").exists()
    assert finetune.main(args) == 0  # resumes from the last checkpoint
    saved = load_file(str(tmp_path / "teacher" / "model.safetensors"))
    assert weights_at_validation[3] == weights_at_validation[2]  # the resume restored the exact weights
    assert weights_hash(saved) == weights_at_validation[0] != weights_at_validation[3]
    metrics = json.loads((tmp_path / "teacher" / "shrinkbert.json").read_text())["metrics"]
    assert metrics["validation_accuracy"] == 0.9
