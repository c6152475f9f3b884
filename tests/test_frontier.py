"""`shrinkbert frontier`: students at speed-up targets over seeds, exported, quantized, one table + plot."""
from __future__ import annotations

import json

import pytest

from shrinkbert.core.errors import ShrinkbertError


def test_parse_speedups():
    from shrinkbert.frontier import parse_speedups

    assert parse_speedups("4x, 2x,2,15X") == [2.0, 4.0, 15.0]
    for bad in ("", "fast", "1x", "0.5x"):
        with pytest.raises(ShrinkbertError):
            parse_speedups(bad)


def test_parse_shapes():
    from shrinkbert.frontier import parse_shapes

    assert parse_shapes("3L/H128, 2l/h160/a5/f640") == [{"layers": 3, "hidden": 128},
                                                        {"layers": 2, "hidden": 160, "heads": 5, "intermediate": 640}]
    assert parse_shapes("") == []
    assert parse_shapes("bilstm/H150/L2, cnn, bag/D64") == [{"student": "bilstm", "hidden": 150, "layers": 2},
                                                             {"student": "cnn"}, {"student": "bag", "token_dim": 64}]
    assert parse_shapes("bilstm/H300/D512/L2") == [{"student": "bilstm", "hidden": 300, "token_dim": 512, "layers": 2}]
    assert parse_shapes("bilstm/H96/D128/align/compose,cnn/align") == [
        {"student": "bilstm", "hidden": 96, "token_dim": 128, "cross_attention": True, "composition": True},
        {"student": "cnn", "cross_attention": True}]
    from shrinkbert.frontier import _shape_label

    assert _shape_label(parse_shapes("bilstm/H96/align/compose")[0]) == "bilstm-H96-align-compose"
    for bad in ("3L", "H128", "3L/H128/X2", "threeL/H128", "lstm/H150", "bag/A4", "bilstm/compose/align",
                "bilstm/H300/H200"):
        with pytest.raises(ShrinkbertError):
            parse_shapes(bad)


def test_frontier_measures_given_shapes_beside_nothing_else(tiny_csv, tmp_path, monkeypatch, capsys):
    from shrinkbert.cli import main
    from shrinkbert.core.artifacts import artifact_hash, read_manifest
    from fixtures import make_tiny_bert

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    teacher = make_tiny_bert(tmp_path / "teacher", layers=4, hidden=64, intermediate=128, seed=2)
    out = tmp_path / "frontier"
    args = ["frontier", "--teacher", str(teacher), "--task", str(tiny_csv), "--speedups", "", "--shapes",
            "2L/H32,bilstm/H8/D16", "--seeds", "1", "--max-steps", "2", "--batch-size", "8", "--max-length", "32",
            "--threads", "1", "--runs", "2", "--warmup", "0", "--init-embeddings", "columns", "--pick", "1000ms",
            "--output-dir", str(out)]
    assert main(args) == 0
    table = json.loads((out / "frontier.json").read_text())
    point, compact = table["points"]
    # both meet a 1000 ms pick: the one kept has the higher mean retention
    best = max((point, compact), key=lambda row: (row["retention_mean"], -row["p50_ms"]))
    assert table["pick"]["met"] and table["pick"]["point"] == best["given"]
    assert f"Pick for 1000ms: {table['pick']['shape']}" in (out / "frontier.md").read_text()
    # a student that is not a transformer stands in the same table, with its own learning rate and no
    # transformer-only option (the columns init above is a transformer's)
    assert compact["given"] == "bilstm-H8-D16" and compact["shape"]["student"] == "bilstm"
    compact_config = read_manifest(compact["students"][0]["student"])["config"]
    assert compact_config["learning_rate"] == 2e-3 and compact_config["init_embeddings"] == "auto"
    assert "| shape given | bilstm/H8/D16 |" in (out / "frontier.md").read_text()
    assert point["speedup_target"] is None and point["given"] == "2L-H32"
    assert (point["shape"]["layers"], point["shape"]["hidden"]) == (2, 32)
    assert point["students"][0]["student"].endswith("2L-H32-seed0")
    assert "| shape given | 2L/H32/" in (out / "frontier.md").read_text()
    # A re-run reuses the student; one against a re-made teacher at the same path must not.
    capsys.readouterr()
    assert main(args) == 0
    assert "reusing" in capsys.readouterr().err
    make_tiny_bert(tmp_path / "teacher", layers=4, hidden=64, intermediate=128, seed=3)
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "remaking" in err and "changed since it was made" in err

    point, _ = json.loads((out / "frontier.json").read_text())["points"]
    made_from = read_manifest(point["students"][0]["student"])["parents"]
    assert artifact_hash(teacher) in {parent["hash"] for parent in made_from}
    # distill options pass through: the old frontier's columns init, not distill's auto (pca here)
    assert read_manifest(point["students"][0]["student"])["config"]["init_embeddings"] == "columns"


def test_frontier_on_tiny_models_writes_the_table_and_plot(tiny_csv, tmp_path, monkeypatch):
    from shrinkbert.cli import main
    from fixtures import make_tiny_bert

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    # Shapes are picked by a fixed clock, not this machine's: at these sizes a call's overhead is the
    # whole of its time, so on a real clock the 1.3x target would be met or not by noise.
    monkeypatch.setattr("shrinkbert.frontier.teacher_reference_ms", lambda *args: (1.0, False))
    monkeypatch.setattr("shrinkbert.students.shape.torch_timer", lambda *args, **kwargs:
                        lambda model, ids: 0.5 if model.config.hidden_size < 64 else 2.0)
    teacher = make_tiny_bert(tmp_path / "teacher", layers=4, hidden=64, intermediate=128, seed=2)
    out = tmp_path / "frontier"
    args = ["frontier", "--teacher", str(teacher), "--task", str(tiny_csv), "--speedups", "1.3x",
            "--seeds", "2", "--runtime", "torch", "--max-steps", "2", "--batch-size", "8", "--max-length", "32",
            "--threads", "1", "--runs", "3", "--warmup", "1", "--output-dir", str(out)]
    assert main(args) == 0
    table = json.loads((out / "frontier.json").read_text())
    assert table["teacher"]["accuracy"] > 0 and table["teacher_int8"]["p50_ms"] > 0
    (point,) = table["points"]
    assert point["speedup_target"] == 1.3 and point["seeds"] == 2 and not point["unmet"]
    assert [s["seed"] for s in point["students"]] == [0, 1]
    assert all(s["int8"].endswith("-int8") for s in point["students"])
    assert point["shape"]["layers"] < 4 or point["shape"]["hidden"] < 64
    assert (point["shape"]["layers"], point["shape"]["hidden"]) == (4, 48)  # the biggest that fits the fixed clock
    assert point["retention_sd"] >= 0 and point["speedup_vs_torch"] > 0 and point["speedup_vs_teacher_int8"] > 0
    assert point["size_mb"] > 0 and point["x_smaller"] > 1
    markdown = (out / "frontier.md").read_text()
    assert "| 1.3x |" in markdown and "±" in markdown and "vs teacher O2+int8 ONNX" in markdown
    assert (out / "frontier.png").stat().st_size > 1000
    # the second seed reused the first seed's shape; a re-run reuses every artifact
    from shrinkbert.core.artifacts import read_manifest

    shapes = [read_manifest(s["student"])["student"]["shape"] for s in point["students"]]
    assert shapes[0] == shapes[1]
    assert main(args) == 0


def test_the_pick_is_the_most_retained_point_that_meets_the_goal_else_the_fastest_unmet():
    from shrinkbert.frontier import parse_pick, pick_point, pick_text

    def row(given, retention, p50, speedup):
        return {"given": given, "seeds": 3, "shape": {"student": given, "hidden_size": 8, "embedding_dim": 16},
                "retention_mean": retention, "retention_sd": 0.01, "p50_ms": p50, "speedup_vs_torch": speedup,
                "students": [{"int8": f"runs/{given}-seed0-int8"}]}

    table = {"points": [row("bilstm", 0.98, 0.30, 60.0), row("bag", 0.93, 0.05, 400.0), row("cnn", 0.98, 0.20, 90.0),
                        {"given": "lost", "seeds": 0, "students": []}]}
    assert pick_point(table, parse_pick("0.35ms"))["point"] == "cnn"  # equal retention: the faster
    assert pick_point(table, parse_pick("100x"))["point"] == "bag"
    assert pick_point(table, parse_pick("0.25ms"))["int8"] == "runs/cnn-seed0-int8"
    unmet = pick_point(table, parse_pick("0.01ms"))
    assert not unmet["met"] and unmet["point"] == "bag" and "no point meets it" in pick_text(unmet)
    assert "shrinkbert bundle --model runs/cnn-seed0-int8" in pick_text(pick_point(table, parse_pick("50x")))


@pytest.mark.parametrize("family", ["mpnet", "distilbert"])
def test_the_teacher_probe_times_a_teacher_that_takes_no_token_types(family, tmp_path):
    from shrinkbert.frontier import probe_teacher_ms
    from fixtures import make_tiny_family

    teacher = make_tiny_family(tmp_path / family, family)
    assert probe_teacher_ms(str(teacher), max_length=16, threads=1) > 0


def test_the_teacher_probe_is_kept_per_output_folder(tmp_path, monkeypatch):
    """A re-run must not move the speed-up targets with the machine's noise (that re-picked every shape)."""
    import shrinkbert.frontier as frontier
    from fixtures import make_tiny_bert

    teacher = make_tiny_bert(tmp_path / "teacher", layers=2, hidden=32, intermediate=64, seed=2)
    probes = iter([10.0, 20.0, 30.0])
    monkeypatch.setattr(frontier, "probe_teacher_ms", lambda *args: next(probes))
    out = tmp_path / "frontier"
    out.mkdir()
    assert frontier.teacher_reference_ms(str(teacher), 32, 1, out, resume=True) == (10.0, False)
    assert frontier.teacher_reference_ms(str(teacher), 32, 1, out, resume=True) == (10.0, True)
    assert frontier.teacher_reference_ms(str(teacher), 32, 2, out, resume=True) == (20.0, False)  # other threads
    assert frontier.teacher_reference_ms(str(teacher), 32, 2, out, resume=False) == (30.0, False)


def test_a_lost_seed_zero_keeps_the_shape_its_sibling_seeds_were_made_with(tmp_path):
    from shrinkbert.core.artifacts import MANIFEST
    from shrinkbert.frontier import _shape_picked_before

    prefix = tmp_path / "students" / "5x"
    assert _shape_picked_before(prefix, 3) is None
    shape = {"layers": 3, "hidden": 384, "heads": 12, "intermediate": 768, "vocab": 30522}
    seed1 = prefix.with_name("5x-seed1")
    seed1.mkdir(parents=True)
    (seed1 / MANIFEST).write_text(json.dumps({"student": {"shape": shape}, "parents": [], "config": {}}))
    assert _shape_picked_before(prefix, 3) == {"layers": 3, "hidden": 384, "heads": 12, "intermediate": 768}
    assert _shape_picked_before(prefix, 1) is None  # only seed 0 asked for, and it is gone


def test_a_cut_point_is_a_wide_student_pruned_then_distilled_again(tiny_csv, tmp_path, monkeypatch):
    """--cuts 1L/H64/A2/F32: a 1-layer student at the teacher's width (4 heads, FFN 128), half its heads
    and three quarters of its FFN removed, distilled again; the table names it as a cut and counts what it kept."""
    from shrinkbert.cli import main
    from shrinkbert.core.artifacts import read_manifest
    from fixtures import make_tiny_bert

    monkeypatch.setenv("SHRINKBERT_CACHE", str(tmp_path / "cache"))
    teacher = make_tiny_bert(tmp_path / "teacher", layers=2, hidden=64, intermediate=128, seed=2)
    out = tmp_path / "frontier"
    common = ["frontier", "--teacher", str(teacher), "--task", str(tiny_csv), "--speedups", "", "--seeds", "1",
              "--max-steps", "2", "--batch-size", "8", "--max-length", "32", "--threads", "1", "--runs", "2",
              "--warmup", "0", "--output-dir", str(out)]
    assert main(common + ["--cuts", "1L/H64/A2/F32"]) == 0
    (point,) = json.loads((out / "frontier.json").read_text())["points"]
    assert point["given"] == "cut-1L-H64-A2-F32"
    assert point["shape"] == {"layers": 1, "hidden": 64, "heads": 2, "intermediate": 32}
    student = point["students"][0]["student"]
    cut = read_manifest(student)["config"]["student"]
    wide = read_manifest(cut)["config"]["model"]
    assert wide.endswith("-seed0-wide") and read_manifest(wide)["student"]["shape"]["heads"] == 4
    assert "| cut | 1L/H64/A2/F32 |" in (out / "frontier.md").read_text()
    from shrinkbert.eval.plot import frontier_points

    table = json.loads((out / "frontier.json").read_text())
    assert frontier_points(table)[-1]["label"] == "cut: 1L/H64/A2/F32"  # the plot names what the cut kept
    assert main(common + ["--cuts", "1L/H64"]) == 2  # a cut must say what it keeps
    fresh = common[:-1] + [str(tmp_path / "refused")]
    assert main(fresh + ["--cuts", "1L/H64/A8/F32"]) == 2  # and keep no more than the wide student has,
    assert not (tmp_path / "refused").exists()  # which is checked before anything is made


def test_a_thread_count_does_not_make_a_student_stale_but_a_recipe_setting_does(tmp_path):
    """Threads change how fast a student is made, not what it is: one made with 2 threads is reused where
    0 (all cores) is asked for; one made with another learning rate is not."""
    from shrinkbert.frontier import _stale_reason

    made = tmp_path / "student"
    made.mkdir()
    (made / "shrinkbert.json").write_text(json.dumps({"config": {"threads": 2, "learning_rate": 3e-4}, "parents": []}))
    assert _stale_reason(made, {"threads": 0, "learning_rate": 3e-4}) == ""
    assert "learning_rate" in _stale_reason(made, {"threads": 2, "learning_rate": 1e-4})


def test_a_missing_teacher_or_bad_data_is_one_line_and_makes_no_folder(tmp_path, capsys):
    from shrinkbert.cli import main
    from fixtures import make_tiny_bert

    teacher = make_tiny_bert(tmp_path / "teacher", layers=2, hidden=32, intermediate=64)
    wrong_columns = tmp_path / "own.csv"
    wrong_columns.write_text("review,stars\ngood film,1\nbad film,0\n")
    for args, said in ((["--teacher", str(tmp_path / "nowhere"), "--cuts", "1L/H32/A2/F32"], "does not exist"),
                       (["--teacher", str(teacher), "--task", str(tmp_path / "missing.csv")], "does not exist"),
                       (["--teacher", str(teacher), "--task", str(wrong_columns)], "no text column 'text'"),
                       (["--teacher", str(teacher), "--pick", "25%"], "give a batch-1 latency")):
        out = tmp_path / "frontier"
        capsys.readouterr()
        assert main(["frontier", *args, "--shapes", "1L/H16", "--output-dir", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and said in err and "\n" not in err
        assert not out.exists()
