"""The distill stage: teacher -> student of a target size (or into an existing model), taught by one
objective (students/objectives/).

    shrinkbert distill --teacher runs/teacher --task movie-snippets --target 25%
    shrinkbert distill --teacher T --task data.csv --layers 4 --hidden 192
    shrinkbert distill --teacher T --task movie-snippets --student runs/pruned  # recovery
    shrinkbert distill --objective masked-lm --teacher MLM_T --corpus sotu,wordnet --target 25%
    shrinkbert distill --objective vectors --teacher minilm --corpus imdb,brown,wordnet --layers 3
    shrinkbert distill --teacher minilm --corpus imdb --student static --dim 256

--objective picks how the student is taught: logits (the task's labelled rows: soft logits, hidden
states, attentions, embeddings, hard labels, each with its weight), masked-lm (a masked-LM student on raw
text, for a later task distillation with --student), vectors (a sentence-embedding student learns the
teacher's sentence vectors) or static (model2vec's static student). Left at auto, the teacher's kind
picks it: an embedding teacher's students learn its vectors, a classifier's, tagger's or QA model's its
logits. An option the objective does not read is refused in one line.
"""
from __future__ import annotations

from pathlib import Path

from shrinkbert.core.config import stage_main
from shrinkbert.core.kinds import kind_of
from shrinkbert.students.configs import DistillConfig as Config
from shrinkbert.students.ensemble import primary_teacher
from shrinkbert.students.objectives import objective_for, refuse_undeclared


def teacher_kind(cfg: Config):
    """The teacher's kind, from its folder (a name such as minilm, or no folder: the default kind)."""
    teacher = Path(primary_teacher(cfg.teacher))
    return kind_of(teacher if teacher.is_dir() else None)


def run(cfg: Config) -> Path:
    """Distil; write the student artifact to cfg.output_dir and return its path."""
    objective = objective_for(teacher_kind(cfg), cfg)
    refuse_undeclared(cfg, objective)
    return objective.run(cfg)


def main(argv: list[str] | None = None, prog: str | None = None, description: str | None = None) -> int:
    """The stage's command line (`shrinkbert NAME` passes its prog and one-line summary)."""
    return stage_main(Config, run, description or __doc__, argv, prog)


if __name__ == "__main__":
    raise SystemExit(main())
