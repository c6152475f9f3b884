"""Make students: shape from a target, init from the teacher, KD losses, distillation."""
