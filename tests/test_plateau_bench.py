"""bench/plateau.py --tiny: the plateau ablation's plumbing end to end on tiny models (every arm,
the pretrained student, the best combination, one measurement, paired intervals against today)."""
import json
from pathlib import Path

import torch

from fixtures import load_bench, make_tiny_bert, tiny_sentences


def test_the_ablation_runs_every_arm_on_tiny_models(tiny_csv, tmp_path, cache_env):
    from transformers import AutoTokenizer, BertForMaskedLM

    teacher = make_tiny_bert(tmp_path / "teacher", seed=2)
    second = make_tiny_bert(tmp_path / "teacher-seed1", seed=5)
    assistant = make_tiny_bert(tmp_path / "assistant", seed=7)
    mlm = tmp_path / "mlm"
    torch.manual_seed(0)
    BertForMaskedLM.from_pretrained(teacher).save_pretrained(mlm, safe_serialization=True)
    AutoTokenizer.from_pretrained(teacher).save_pretrained(mlm)
    text = tmp_path / "text.txt"
    text.write_text("\n".join(t for t, _ in tiny_sentences(120, seed=4)) + "\n")
    out = tmp_path / "plateau"
    assert load_bench("plateau").main(["--tiny", "--teacher", str(teacher), "--task", str(tiny_csv), "--seeds", "1",
                            "--assistant", str(assistant), "--ensemble", f"{teacher},{second}",
                            "--pretrain-from", str(mlm), "--pretrain-corpus", str(text),
                            "--best", "pretrained,assistant", "--out", str(out)]) == 0
    table = json.loads((out / "plateau.json").read_text())
    rows = {row["given"]: row for row in table["points"]}
    assert list(rows) == ["today", "pca", "projected", "assistant", "ensemble", "pretrained", "wide", "pruned", "best"]
    assert all(row["seeds"] == 1 and not row["unmet"] for row in rows.values())
    assert table["best"] == {"arms": ["pretrained", "assistant"]}
    assert "vs_reference" not in rows["today"]  # the reference itself
    for name, row in list(rows.items())[1:]:  # every other arm against today, paired on the same test rows
        diff = row["vs_reference"]
        assert diff["vs"] == "today" and diff["low"] <= diff["difference"] <= diff["high"], name
    best = json.loads((Path(rows["best"]["students"][0]["student"]) / "shrinkbert.json").read_text())
    assert best["config"]["student"] == table["pretrained"]["path"] and best["config"]["teacher"] == str(assistant)
    # the pruned arm: the wide student of its seed, cut (half its heads, three quarters of its FFN), distilled again
    wide = json.loads((Path(rows["wide"]["students"][0]["student"]) / "config.json").read_text())
    pruned = Path(rows["pruned"]["students"][0]["student"])
    cut = Path(json.loads((pruned / "shrinkbert.json").read_text())["config"]["student"])
    assert json.loads((cut / "shrinkbert.json").read_text())["config"]["model"] == rows["wide"]["students"][0]["student"]
    kept = json.loads((pruned / "config.json").read_text())
    assert wide["hidden_size"] == kept["hidden_size"] == 32 and wide["intermediate_size"] == 64
    assert kept["intermediate_size"] == 16 and all(len(h) == 2 for h in kept["pruned_heads"].values())
    assert rows["pruned"]["shape"] == {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 16}
    pretrained = table["pretrained"]
    assert pretrained["corpus_words"] == {str(text): sum(len(t.split()) for t, _ in tiny_sentences(120, seed=4))}
    assert pretrained["kd_weight"] == 1.0 and pretrained["steps"] == 2
    markdown = (out / "plateau.md").read_text()
    assert "| pretrained |" in markdown and "Pretrained student: " in markdown and "MLM-KD" in markdown
