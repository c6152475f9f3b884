"""core/train.py: schedule, weight-decay groups, two CPU processes in step, exact resume after SIGKILL."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from shrinkbert.core.train import TrainConfig, param_groups, train

ROOT = Path(__file__).resolve().parents[1]


def tiny_classification(model_dir, n=48, seed=0):
    """(model, tokenized dataset, collate_fn, loss_fn) for a tiny BERT on tiny sentences."""
    import datasets
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding

    from fixtures import tiny_sentences

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = tiny_sentences(n, seed)
    ds = datasets.Dataset.from_dict({"text": [r[0] for r in rows], "labels": [r[1] for r in rows]})
    ds = ds.map(lambda b: tokenizer(b["text"]), batched=True, remove_columns=["text"])
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)

    def loss_fn(m, batch):
        out = m(**batch)
        return out.loss, {"acc": float((out.logits.argmax(-1) == batch["labels"]).float().mean())}

    return model, ds, DataCollatorWithPadding(tokenizer), loss_fn


def test_warmup_then_linear_decay(tiny_bert, tmp_path):
    model, ds, collate, loss_fn = tiny_classification(tiny_bert)
    cfg = TrainConfig(learning_rate=1e-3, warmup_steps=4, epochs=2, batch_size=4, grad_accum_steps=2,
                      log_every=1, checkpoint_every=0)
    metrics = train(model, ds, collate, loss_fn, cfg, tmp_path / "ckpt")
    steps = 2 * (48 // 4) // 2  # 12 micro-batches an epoch, 2 per optimizer step
    assert metrics["steps"] == steps
    lrs = [h["lr"] for h in metrics["history"] if h["kind"] == "train"]
    assert len(lrs) == steps
    # lr after step k: k/4 of the peak while warming up, then linear to 0 at the last step
    expected = [1e-3 * min(k / 4, (steps - k) / (steps - 4)) for k in range(1, steps + 1)]
    assert lrs == pytest.approx(expected)
    assert metrics["tokens_per_s"] > 0 and "acc" in metrics["history"][0]
    assert not (tmp_path / "ckpt").exists()  # checkpoint_every=0 writes nothing


def test_weight_decay_groups(tiny_bert):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert)
    extra = torch.nn.Linear(32, 8)
    model.bert.embeddings.requires_grad_(False)
    decay, no_decay = param_groups([model, extra], 0.1)
    names = {id(p): n for n, p in [*model.named_parameters(), *(("extra." + n, p) for n, p in extra.named_parameters())]}
    decayed = {names[id(p)] for p in decay["params"]}
    kept = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(not n.endswith("bias") and "LayerNorm" not in n for n in decayed)
    assert all(n.endswith("bias") or "LayerNorm" in n for n in kept)
    assert "extra.weight" in decayed and "extra.bias" in kept
    assert "bert.encoder.layer.0.attention.self.query.weight" in decayed
    assert "bert.encoder.layer.0.output.LayerNorm.weight" in kept
    assert not any(n.startswith("bert.embeddings") for n in decayed | kept)  # frozen: not optimised
    assert len(decayed) + len(kept) == sum(p.requires_grad for p in model.parameters()) + 2


def _two_process_worker(model_dir, out_dir):
    from accelerate import PartialState
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # forked from a parent that made its own

    model, ds, collate, loss_fn = tiny_classification(model_dir)
    extra = torch.nn.Linear(32, 32)  # a distillation-style projection, trained alongside
    extra_initial = extra.weight.detach().clone()

    def loss_with_extra(m, batch):
        loss, logs = loss_fn(m, batch)
        hidden = m.bert.embeddings.word_embeddings(batch["input_ids"])
        return loss + 0.01 * extra(hidden).pow(2).mean(), logs

    cfg = TrainConfig(learning_rate=1e-3, epochs=2, batch_size=4, checkpoint_every=3, log_every=2)
    metrics = train(model, ds, collate, loss_with_extra, cfg, Path(out_dir) / "ckpt", extra_modules=[extra])
    rank = PartialState().process_index
    weights = {**{k: v.detach() for k, v in model.state_dict().items()},
               **{"extra." + k: v.detach() for k, v in extra.state_dict().items()}, "initial.extra": extra_initial}
    torch.save(weights, Path(out_dir) / f"rank{rank}.pt")
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps({k: metrics[k] for k in ("steps", "num_processes")}))


def test_two_cpu_processes_stay_in_step(tiny_bert, tmp_path):
    from accelerate import debug_launcher

    # debug_launcher takes no timeout: the per-test limit (pytest-timeout, pyproject) ends a hung gloo run
    debug_launcher(_two_process_worker, args=(str(tiny_bert), str(tmp_path)), num_processes=2)
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(i["num_processes"] == 2 for i in infos)
    # 48 rows, 4 per batch per process: 6 steps an epoch, 2 epochs
    assert all(i["steps"] == 12 for i in infos)
    w0, w1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    from safetensors.torch import load_file
    initial = load_file(tiny_bert / "model.safetensors")
    assert all(torch.equal(w0[k], w1[k]) for k in w0), "replicas diverged: gradients were not synchronised"
    assert not torch.equal(w0["bert.encoder.layer.0.attention.self.query.weight"],
                           initial["bert.encoder.layer.0.attention.self.query.weight"])
    assert not torch.equal(w0["extra.weight"], w0["initial.extra"])


def _stage_args(stage: str, out: Path, tiny_bert: Path, data: Path, corpus: Path, cache: Path) -> list[str]:
    """Command-line arguments for a short, checkpointing run of one training stage."""
    common = ["--output-dir", str(out), "--batch-size", "4", "--grad-accum-steps", "2", "--learning-rate", "1e-3",
              "--checkpoint-every", "5", "--seed", "7"]
    if stage == "shrinkbert.teachers.finetune":
        return common + ["--model", str(tiny_bert), "--task", str(data), "--cache-dir", str(cache), "--epochs", "3"]
    if stage == "shrinkbert.teachers.pretrain":  # from scratch, dynamic masking: the masking RNG must resume too
        return common + ["--tokenizer", str(tiny_bert), "--preset", "micro", "--corpus", str(corpus),
                         "--max-length", "32", "--max-steps", "18", "--heldout-fraction", "0.1"]
    if stage == "embeddings":  # students.distill --objective vectors: the same loop, the same resume
        return common + ["--objective", "vectors", "--teacher", str(tiny_bert), "--corpus", str(corpus),
                         "--cache-dir", str(cache), "--layers", "1", "--epochs", "2", "--hidden-weight", "1.0"]
    return common + ["--teacher", str(tiny_bert), "--task", str(data), "--cache-dir", str(cache),  # students.distill
                     "--layers", "1", "--epochs", "2", "--hidden-weight", "1.0", "--attention-weight", "1.0"]


@pytest.mark.parametrize("stage", ["shrinkbert.teachers.finetune", "shrinkbert.teachers.pretrain", "shrinkbert.students.distill",
                                   "embeddings"])
def test_stage_sigkill_then_resume_is_bit_exact(stage, tiny_bert, tmp_path):
    """A training stage killed with SIGKILL after a checkpoint, rerun, ends bit-identical to a whole run.

    The whole run goes in this process (pytest runs torch on 1 thread, as the subprocesses do) while
    a watcher thread kills the subprocess as soon as its first checkpoint is committed.
    """
    import importlib
    import threading

    from safetensors.torch import load_file

    from fixtures import tiny_sentences, write_tiny_csv
    from shrinkbert.core.train import LATEST, checkpoint_dir_for

    data = write_tiny_csv(tmp_path / "data.csv", n=300)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(t for t, _ in tiny_sentences(400, seed=3)) + "\n")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    module = "shrinkbert.students.distill" if stage == "embeddings" else stage
    main = importlib.import_module(module).main

    def args(out):
        return _stage_args(stage, out, tiny_bert, data, corpus, tmp_path / "cache")

    if stage != "shrinkbert.teachers.pretrain":  # builds the stored splits before two processes race for them
        assert main(args(tmp_path / "warm") + ["--epochs", "1"]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    victim = subprocess.Popen([sys.executable, "-m", module, *args(killed)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = checkpoint_dir_for(killed)

    def committed() -> bool:
        try:
            return any(checkpoints.rglob(LATEST))
        except OSError:  # a checkpoint's temporary folder renamed into place while the walk read it
            return False

    def kill_after_first_checkpoint():
        while victim.poll() is None and not committed():
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)

    watcher = threading.Thread(target=kill_after_first_checkpoint)
    watcher.start()
    assert main(args(whole)) == 0
    watcher.join()
    assert victim.wait(timeout=240) == -signal.SIGKILL, "the run ended before it could be killed"
    assert any(checkpoints.rglob(LATEST)) and not killed.exists()
    resumed = subprocess.run([sys.executable, "-m", module, *args(killed)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout + resumed.stderr
    a, b = load_file(whole / "model.safetensors"), load_file(killed / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed run differs from the uninterrupted one"
    ma, mb = (json.loads((d / "shrinkbert.json").read_text())["metrics"] for d in (whole, killed))
    assert ma["steps"] == mb["steps"]
    for key in ("test_accuracy", "heldout_mlm_loss_after"):
        assert ma.get(key) == mb.get(key)


def test_resume_refuses_other_settings(tiny_bert, tmp_path):
    from shrinkbert.core.errors import ShrinkbertError

    model, ds, collate, loss_fn = tiny_classification(tiny_bert, n=16)
    cfg = TrainConfig(epochs=1, batch_size=4, checkpoint_every=1)
    train(model, ds, collate, loss_fn, cfg, tmp_path / "ckpt")
    again = train(model, ds, collate, loss_fn, cfg, tmp_path / "ckpt")  # finished: returns at once
    assert again["steps"] == 4
    # scheduler and position are JSON; nothing that resume would have to unpickle unsafely
    assert not list((tmp_path / "ckpt").rglob("custom_checkpoint_*"))
    saved = json.loads(next((tmp_path / "ckpt").rglob("train_state.json")).read_text())
    assert saved["state"]["step"] == 4 and saved["scheduler"]["last_epoch"] == 4
    with pytest.raises(ShrinkbertError, match="other settings.*learning_rate"):
        train(model, ds, collate, loss_fn, TrainConfig(epochs=1, batch_size=4, checkpoint_every=1,
                                                       learning_rate=1.0), tmp_path / "ckpt")


def test_length_grouped_sampler_every_row_once_per_epoch():
    """1 and 2 processes, dealt out by Accelerate's own shard logic: disjoint, complete, grouped, seeded."""
    from accelerate.data_loader import BatchSamplerShard
    from torch.utils.data import BatchSampler

    from shrinkbert.core.train import LengthGroupedSampler

    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 120, (960,), generator=gen).tolist()
    batch_size = 8
    for procs in (1, 2):
        sampler = LengthGroupedSampler(lengths, batch_size, procs, seed=3)
        orders = []
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            per_process = [[i for batch in BatchSamplerShard(BatchSampler(sampler, batch_size, False), procs, rank)
                            for i in batch] for rank in range(procs)]
            seen = [i for rows in per_process for i in rows]
            assert sorted(seen) == list(range(len(lengths))), "every row exactly once per epoch"
            orders.append(list(sampler))
            # padding: a grouped batch pads far less than a random one
            batches = [list(b) for b in BatchSampler(sampler, batch_size, False)]
            padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
            assert padded < 1.15 * sum(lengths)
        assert orders[0] != orders[1], "a new shuffle every epoch"
        sampler.set_epoch(1)
        again = LengthGroupedSampler(lengths, batch_size, procs, seed=3)
        again.set_epoch(1)
        assert list(again) == list(sampler) == orders[1], "the order depends on seed and epoch only"


def test_length_grouped_resume_sees_the_same_batches(tiny_bert, tmp_path):
    """A run that dies after a checkpoint and is rerun sees exactly the batches an unbroken run saw."""
    model, ds, collate, loss_fn = tiny_classification(tiny_bert, n=60)

    def recording(seen, die_at=None):
        def fn(m, batch):
            if die_at is not None and len(seen) == die_at:
                raise KeyboardInterrupt("killed")
            seen.append([tuple(r.tolist()) for r in batch["input_ids"]])
            return loss_fn(m, batch)
        return fn

    cfg = TrainConfig(learning_rate=1e-3, epochs=3, batch_size=4, checkpoint_every=4, log_every=1)
    assert cfg.group_by_length
    whole: list = []
    train(model, ds, collate, recording(whole), cfg, tmp_path / "a")
    model2, *_ = tiny_classification(tiny_bert, n=60)
    first: list = []
    with pytest.raises(KeyboardInterrupt):  # dies mid-epoch 2, after the checkpoint at step 20
        train(model2, ds, collate, recording(first, die_at=22), cfg, tmp_path / "b")
    rest: list = []
    train(model2, ds, collate, recording(rest), cfg, tmp_path / "b")
    assert first == whole[:22] and rest == whole[20:], "the resumed run saw other batches"
    assert len(whole) == 45
    assert whole[:15] != whole[15:30]  # reshuffled per epoch


class _Payload:
    """Unpickling this runs a shell command: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_crafted_pickle_checkpoint_is_refused_by_every_loader(tiny_bert, tmp_path):
    """Resume (every file Accelerate unpickles) and the model loader refuse a pickle that runs code."""
    import shutil

    from transformers import AutoModelForSequenceClassification

    from shrinkbert.core.errors import ShrinkbertError
    from shrinkbert.core.models import load_model
    from shrinkbert.core.train import LATEST

    model, ds, collate, loss_fn = tiny_classification(tiny_bert, n=16)
    cfg = TrainConfig(epochs=1, batch_size=8, checkpoint_every=1)
    train(model, ds, collate, loss_fn, cfg, tmp_path / "ckpt")
    latest = tmp_path / "ckpt" / (tmp_path / "ckpt" / LATEST).read_text().strip()
    pickled = sorted(p.name for p in latest.iterdir() if p.suffix in (".bin", ".pkl", ".pt"))
    assert "optimizer.bin" in pickled and any(n.startswith("random_states") for n in pickled), pickled
    marker = tmp_path / "pwned"
    for name in pickled:
        crafted = tmp_path / f"ckpt-{name}"
        shutil.copytree(tmp_path / "ckpt", crafted)
        torch.save({"state": _Payload(marker)}, crafted / latest.name / name)
        with pytest.raises(ShrinkbertError, match="cannot be loaded safely"):
            train(model, ds, collate, loss_fn, cfg, crafted)
        assert not marker.exists(), f"resume unpickled a crafted {name} and ran its code"

    bad_model = tmp_path / "model"
    shutil.copytree(tiny_bert, bad_model)
    torch.save({"state": _Payload(marker)}, bad_model / "pytorch_model.bin")
    load_model(AutoModelForSequenceClassification, bad_model)  # safetensors beside it: the pickle is never read
    (bad_model / "model.safetensors").unlink()
    with pytest.raises(ShrinkbertError, match="pickle checkpoint and is refused"):
        load_model(AutoModelForSequenceClassification, bad_model)
    assert not marker.exists()


def test_mixed_precision_on_cpu_is_bf16_only_where_the_cores_have_it(monkeypatch):
    """CPU autocast in bf16 is a speed-up only on bf16 instructions; fp16 never runs on a CPU here."""
    import shrinkbert.core.train as train_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)
    assert [train_module.resolve_mixed_precision(m) for m in ("no", "bf16", "BF16", "fp16")] == ["no", "bf16", "bf16", "no"]
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: False)
    assert train_module.resolve_mixed_precision("bf16") == "no"
    with pytest.raises(Exception, match="mixed_precision must be"):
        train_module.resolve_mixed_precision("int8")


def test_one_process_trains_in_one_precision_then_another(tiny_bert, tmp_path, monkeypatch):
    """A Python session that trains a student in bf16 and then a model in fp32 (bench/embedding_student.py:
    a transformer student, then a static table) gets both; Accelerate alone refuses the second."""
    import shrinkbert.core.train as train_module

    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)  # bf16 autocast runs on any x86 CPU
    for precision in ("bf16", "no", "bf16"):
        model, ds, collate, loss_fn = tiny_classification(tiny_bert, n=8)
        cfg = TrainConfig(epochs=1, batch_size=4, checkpoint_every=0, mixed_precision=precision)
        assert train(model, ds, collate, loss_fn, cfg, tmp_path / precision)["mixed_precision"] == precision


def test_auto_precision_is_bf16_only_for_wide_models_on_bf16_cores(monkeypatch):
    """`auto` (the default) turns CPU bf16 on where it was measured faster: a model 160 wide or wider on
    cores with bf16 instructions; the tests' narrow models, a CPU without bf16 and a GPU stay fp32."""
    from transformers import BertConfig, BertModel

    import shrinkbert.core.train as train_module

    def model(hidden):
        return BertModel(BertConfig(hidden_size=hidden, num_hidden_layers=1, num_attention_heads=4,
                                    intermediate_size=hidden, vocab_size=50))

    wide, narrow = model(160), model(32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)
    assert train_module.resolve_mixed_precision("auto", wide) == "bf16"
    assert train_module.resolve_mixed_precision("auto", torch.nn.ModuleList([narrow, wide])) == "bf16"  # the widest
    assert train_module.resolve_mixed_precision("auto", narrow) == "no"
    assert train_module.resolve_mixed_precision("auto", torch.nn.Linear(512, 512)) == "no"  # no config: not measured
    # a teacher whose outputs may be cached is not loaded: its width is given
    assert [train_module.resolve_mixed_precision("auto", width=w) for w in (384, 32, None)] == ["bf16", "no", "no"]
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: False)
    assert train_module.resolve_mixed_precision("auto", wide) == "no"
    monkeypatch.setattr(train_module, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert train_module.resolve_mixed_precision("auto", wide) == "no"


def test_cpu_has_bf16_reads_the_cpu_flags(monkeypatch):
    import shrinkbert.core.device as device

    monkeypatch.setattr(device, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    assert device.cpu_has_bf16()
    monkeypatch.setattr(device, "cpu_flags", lambda: {"avx2", "amx_bf16", "amx_tile"})
    assert device.cpu_has_bf16()
    monkeypatch.setattr(device, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_vnni"})
    assert not device.cpu_has_bf16()
