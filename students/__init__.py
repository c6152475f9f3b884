"""Make students: shape from a target, init from the teacher, KD losses, distillation.

One module, one job:

    shape.py    the student's shape from a target (25% of the teacher's parameters, 20MB fp32,
                4ms batch-1 latency on this machine) or from explicit layers/hidden/heads/FFN;
                parameter counts are analytic; an unmeetable target says the minimum possible
    init.py     copy the teacher into the student: chosen layers (default uniform, 6 -> 3 takes
                teacher layers 2, 4, 6), the most important hidden dims / whole heads / FFN
                neurons when narrower; embeddings, pooler and classifier carried over
    losses.py   soft-logit KD (T^2-scaled KL), hidden-state MSE, attention transfer, embedding
                MSE, hard-label CE, each with a weight (0 = off, not computed), and the layer map
    cache.py    the teacher's logits (and chosen hidden states, fp16) computed once per teacher +
                tokenized data + max_length and stored as safetensors
    objectives/ how a student is taught, one module each: logits (task distillation), masked_lm
                (general distillation), vectors (a sentence-embedding student), static (model2vec's
                table); each declares its options, what it reads from the teacher, its loss terms
    distill.py  the stage: `python -m shrinkbert.students.distill --teacher DIR --task NAME --target 25%`
                picks the objective (`--objective`, else the teacher's kind's) and runs it

Writing a layer map: "1:2,2:4,3:6" means student layer 1 learns from teacher layer 2, and so
on; layers count from 1 and 0 is the embedding output. Leave it empty for the uniform map
(student layer i <- teacher layer round(i * T / S), so the top layers always meet).

Projections: when the student is narrower than the teacher, the hidden-state and embedding
losses compare them through a learned linear map (student width -> teacher width). Those
projections exist only for training and are not saved with the student: the student's own
classifier reads its own hidden states, so nothing at inference needs them. The manifest of a
distilled student records that they were used and dropped.
"""
