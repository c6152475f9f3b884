"""Make a teacher: WordPiece tokenizer, MLM(+NSP) pretraining, task fine-tuning."""
