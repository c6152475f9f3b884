"""Library messages a user cannot act on are replaced or dropped, and only those (core/quiet.py)."""
from __future__ import annotations

import logging

from fixtures import make_tiny_bert

from shrinkbert.core.quiet import SHARED_TENSORS, _NamesReport, _tied_decoder, new_head_reported, tied_decoder_quiet


def test_a_new_head_is_named_in_one_line_instead_of_train_this_model(tmp_path, capfd):
    """finetune's classifier on an encoder saved without one: the kit names the new modules, and
    transformers' "You should probably TRAIN this model" (what the stage is about to do) is gone."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

    tiny = make_tiny_bert(tmp_path / "tiny", with_manifest=False)
    AutoModel.from_pretrained(tiny).save_pretrained(tmp_path / "encoder")  # the encoder alone: no classifier
    capfd.readouterr()
    with new_head_reported("finetune"):
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "encoder", num_labels=3)
    out, err = capfd.readouterr()
    assert "TRAIN this model" not in err and "newly initialized" not in err
    line = [text for text in out.splitlines() if text.startswith("finetune: new weights")]
    assert len(line) == 1 and "classifier" in line[0], out
    capfd.readouterr()
    with new_head_reported("pretrain"):  # a new MLM head: its outermost module, once
        AutoModelForMaskedLM.from_pretrained(tmp_path / "encoder")
    out, err = capfd.readouterr()
    assert "TRAIN this model" not in err and "pretrain: new weights, trained here: cls.predictions\n" in out, out
    # outside the block transformers speaks as before
    AutoModelForSequenceClassification.from_pretrained(tmp_path / "encoder", num_labels=3)
    assert "newly initialized" in capfd.readouterr().err


def test_only_an_mlm_decoders_tied_tensors_are_dropped_at_save_time(caplog):
    logger = logging.getLogger("accelerate.utils.other")
    tied = "Removed shared tensor {'cls.predictions.decoder.bias', 'cls.predictions.decoder.weight'} while saving."
    other = "Removed shared tensor {'encoder.layer.0.output.dense.weight'} while saving."
    with caplog.at_level(logging.WARNING), tied_decoder_quiet():
        logger.warning(tied)
        logger.warning(other)
    messages = [record.getMessage() for record in caplog.records]
    assert tied not in messages and other in messages  # a weight shared by mistake still reaches the user

    def kept(message: str) -> bool:
        return _NamesReport(SHARED_TENSORS, _tied_decoder).filter(logging.LogRecord("t", logging.WARNING, "", 0, message, None, None))
    assert not kept(tied) and kept(other) and kept("an unrelated warning")
