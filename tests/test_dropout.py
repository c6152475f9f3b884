"""`distill --dropout`: every dropout of every family set while the student trains, and put back."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from fixtures import FAMILY_MODELS
from shrinkbert.students.dropout import override_dropout


def _tiny(family: str):
    shape = (dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64) if family == "distilbert" else
             dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64))
    config = AutoConfig.for_model(family, vocab_size=64, max_position_embeddings=64, pad_token_id=0, **shape)
    for name, value in vars(config).items():  # every dropout on (ModernBERT's are 0 by default)
        if "dropout" in name and isinstance(value, float):
            setattr(config, name, 0.3)
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(config).train()


def _twice_equal(model) -> bool:
    ids = torch.randint(5, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return torch.equal(model(input_ids=ids).logits, model(input_ids=ids).logits)


@pytest.mark.parametrize("family", FAMILY_MODELS)
def test_dropout_off_makes_training_mode_deterministic_and_restore_brings_it_back(family):
    model = _tiny(family)
    before = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert not _twice_equal(model)  # dropout is on: two training-mode passes differ
    restore = override_dropout(model, 0.0)
    assert _twice_equal(model), f"{family}: a dropout was left on"
    restore()
    assert not _twice_equal(model)
    assert [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)] == before


def test_distill_records_the_dropout_and_saves_the_familys_config(tiny_bert, tiny_csv, cache_env, tmp_path):
    from shrinkbert.core.artifacts import read_manifest
    from shrinkbert.core.config import build_config
    from shrinkbert.students.distill import Config, run

    out = run(build_config(Config, {"teacher": str(tiny_bert), "task": str(tiny_csv), "layers": 1, "max_steps": 2,
                                    "batch_size": 8, "max_length": 32, "dropout": 0.0, "checkpoint_every": 0,
                                    "output_dir": str(tmp_path / "s")}))
    assert read_manifest(out)["student"]["dropout"] == 0.0
    saved = json.loads((out / "config.json").read_text())
    teacher = json.loads((tiny_bert / "config.json").read_text())
    assert saved["hidden_dropout_prob"] == teacher["hidden_dropout_prob"] > 0


def test_cpu_training_steps_of_up_to_128_tokens_run_sdpa_math_kernel():
    from shrinkbert.core.train import MATH_ATTENTION_UP_TO, attention_kernel

    cpu = torch.device("cpu")
    with attention_kernel({"input_ids": torch.zeros(2, MATH_ATTENTION_UP_TO)}, cpu):
        assert not torch.backends.cuda.flash_sdp_enabled()  # the flags SDPA's CPU dispatch reads too
    for batch, device in (({"input_ids": torch.zeros(2, MATH_ATTENTION_UP_TO + 1)}, cpu),
                          ({"input_ids": torch.zeros(2, 28)}, torch.device("cuda")), ({}, cpu)):
        with attention_kernel(batch, device):
            assert torch.backends.cuda.flash_sdp_enabled()
