"""Library messages a user cannot act on are replaced or dropped, and only those (core/quiet.py)."""
from __future__ import annotations

import logging

from fixtures import make_tiny_bert

from shrinkbert.core.quiet import SHARED_TENSORS, _NamesReport, _tied_decoder, new_head_reported, tied_decoder_quiet


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_new_head_is_named_in_one_line_instead_of_train_this_model(tmp_path, capsys):
    """finetune's classifier on an encoder saved without one: the kit names the new modules, and
    transformers' "You should probably TRAIN this model" (what the stage is about to do) is gone."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

    tiny = make_tiny_bert(tmp_path / "tiny", with_manifest=False)
    AutoModel.from_pretrained(tiny).save_pretrained(tmp_path / "encoder")  # the encoder alone: no classifier
    # a handler on transformers' own logger sees what passes its filters, whatever other tests set
    logger, seen = logging.getLogger("transformers.modeling_utils"), _Collect()
    level = logger.level
    logger.addHandler(seen)
    logger.setLevel(logging.WARNING)

    def reports() -> list[str]:
        return [message for message in seen.messages if "newly initialized" in message]
    try:
        capsys.readouterr()
        with new_head_reported("finetune"):
            AutoModelForSequenceClassification.from_pretrained(tmp_path / "encoder", num_labels=3)
        line = [text for text in capsys.readouterr().out.splitlines() if text.startswith("finetune: new weights")]
        assert len(line) == 1 and "classifier" in line[0] and not reports(), line
        with new_head_reported("pretrain"):  # a new MLM head: its outermost module, once
            AutoModelForMaskedLM.from_pretrained(tmp_path / "encoder")
        assert "pretrain: new weights, trained here: cls.predictions\n" in capsys.readouterr().out
        assert not reports()
        # outside the block transformers speaks as before
        AutoModelForSequenceClassification.from_pretrained(tmp_path / "encoder", num_labels=3)
        assert len(reports()) == 1
    finally:
        logger.removeHandler(seen)
        logger.setLevel(level)


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
