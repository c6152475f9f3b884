"""BERT and the families that share its layer layout exactly (query/key/value, output.dense, intermediate,
output): RoBERTa (XLM-R, CamemBERT) and ELECTRA. Narrower students are sliced from them (students/init.py)."""
from __future__ import annotations

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.families.base import Family, Layout, Widths


class BertFamily(Family):
    name = "BERT"
    model_types = ("bert",)
    base_prefix = "bert"
    layout = Layout()
    counts_like_bert = True
    ort_fusion = "bert"
    pretraining_class = "BertForPreTraining"


class RobertaFamily(BertFamily):
    name = "RoBERTa/XLM-R"
    model_types = ("roberta", "xlm-roberta", "camembert")
    base_prefix = "roberta"  # XLM-R's and CamemBERT's classes keep RoBERTa's
    pretraining_class = None  # RoBERTa dropped next-sentence prediction


class ElectraFamily(BertFamily):
    name = "ELECTRA"
    model_types = ("electra",)
    base_prefix = "electra"
    pretraining_class = None  # ElectraForPreTraining is the replaced-token discriminator, no MLM or NSP head

    def extra_student_fields(self, teacher_config, widths: Widths) -> dict:
        # ELECTRA may embed at a smaller width and project up (embeddings_project); a sliced student
        # keeps that only when the teacher embeds at its full width.
        if teacher_config.embedding_size == teacher_config.hidden_size:
            return {"embedding_size": widths.hidden}
        return {}

    def check_student(self, teacher_config, widths: Widths) -> None:
        if teacher_config.embedding_size != teacher_config.hidden_size and widths.hidden != teacher_config.hidden_size:
            raise ShrinkbertError(
                f"this ELECTRA embeds at {teacher_config.embedding_size} and projects to {teacher_config.hidden_size}: "
                "a student from it keeps the hidden size (give --layers, --heads or --intermediate, not --hidden)")
