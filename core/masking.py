"""BERT's masking (15% of the real tokens; of those 80% [MASK], 10% a random token, 10% kept),
one home for MLM pretraining and general distillation.

Not transformers' DataCollatorForLanguageModeling: its torch_mask_tokens builds its probability
tensors on the CPU and draws replacement ids from the whole vocabulary, special tokens included.
Here the draws happen on the batch's device, from the global RNG (so a checkpoint resumes them
exactly) or from a given generator (static masking), and never produce [CLS]/[SEP]/[PAD]/[MASK].
"""
from __future__ import annotations

import torch

from shrinkbert.core.errors import ShrinkbertError


class Masker:
    """BERT's 80/10/10 masking over the non-special tokens of a batch of input_ids."""

    def __init__(self, tokenizer, probability: float = 0.15):
        if not 0 < probability < 1:
            raise ShrinkbertError(f"mlm_probability must be between 0 and 1, got {probability}")
        if tokenizer.mask_token_id is None:
            raise ShrinkbertError("the tokenizer has no [MASK] token, so it cannot be used for MLM")
        self.probability = probability
        self.mask_id = tokenizer.mask_token_id
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        special = set(self.special_ids.tolist())
        self.random_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)

    def __call__(self, input_ids: torch.Tensor, generator: torch.Generator | None = None):
        """(masked input_ids, labels with -100 where nothing is predicted); input_ids is not modified."""
        device = input_ids.device if generator is None else generator.device

        def draw(p, shape):
            return torch.bernoulli(torch.full(shape, p, device=device), generator=generator).bool()

        if self.special_ids.device != torch.device(device):  # keep the lookup tables where the batches are
            self.special_ids, self.random_ids = self.special_ids.to(device), self.random_ids.to(device)
        ids = input_ids.to(device)
        special = torch.isin(ids, self.special_ids)
        selected = draw(self.probability, ids.shape) & ~special
        to_mask = draw(0.8, ids.shape) & selected
        to_random = draw(0.5, ids.shape) & selected & ~to_mask
        random_ids = self.random_ids[torch.randint(len(self.random_ids), ids.shape, device=device,
                                                              generator=generator)]
        masked = torch.where(to_mask, torch.full_like(ids, self.mask_id), ids)
        masked = torch.where(to_random, random_ids, masked)
        labels = torch.where(selected, ids, torch.full_like(ids, -100))
        return masked.to(input_ids.device), labels.to(input_ids.device)
