"""The Python API documents itself from the stage registry: help(shrinkbert.distill) and
`shrinkbert distill --help` show the same parameters, defaults, bounds and help texts; errors name
keywords from Python and flags from the command line; in-memory transformers models go through
finetune, distill, prune and export; anything else that is not a path is refused in one line."""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import pydoc
import re
import subprocess
import sys
import warnings

import pytest

import shrinkbert
from shrinkbert import cli
from shrinkbert.api import run_stage
from shrinkbert.core.config import flag, option_help, options
from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.core.progress import progress_bar
from shrinkbert.core.quiet import quiet_library_warnings
from shrinkbert.stages import API_STAGES, STAGES

TINY_TRAIN = {"epochs": 1, "batch_size": 8, "max_length": 32, "checkpoint_every": 0, "log_every": 100}


def _squash(text: str) -> str:
    """Text with all whitespace removed: argparse and the docstring wrap lines differently."""
    return re.sub(r"\s+", "", text)


def _cli_help(name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def _cli_error(argv: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv)
    assert code == 2, err.getvalue()
    return err.getvalue()


@pytest.mark.parametrize("api_name", ["distill", "finetune", "export", "quantize", "report"])
def test_help_and_cli_help_show_the_same_parameters_and_help_texts(api_name):
    stage = API_STAGES[api_name]
    api_help = _squash(pydoc.render_doc(getattr(shrinkbert, api_name), renderer=pydoc.plaintext))
    cli_help = _squash(_cli_help(stage.name))
    for option in options(stage.config_class):
        text = _squash(option_help(option))
        assert _squash(flag(option.name)) in cli_help and text in cli_help, (stage.name, option.name)
        assert _squash(f"{option.name}: {option.type_text} = {option.default!r}") in api_help, option.name
        assert text in api_help, (api_name, option.name)
        if option.default not in ("", None, []):
            assert _squash(f"(default: {option.default!r})") in cli_help, option.name
    assert stage.summary.replace(" ", "")[1:] in api_help and stage.summary.replace(" ", "") in cli_help


def test_help_names_the_command_typed_and_groups_options_by_concern():
    text = _cli_help("distill")
    assert text.startswith("usage: shrinkbert distill ")
    headings = [line[:-1] for line in text.splitlines() if re.match(r"^[a-z][a-z ]*:$", line)]
    assert headings == ["options", "model", "data", "student shape", "losses", "teacher outputs", "training loop",
                        "output"]
    losses = text.split("\nlosses:\n")[1].split("\n\n")[0]
    assert "--temperature" in losses and "--logits-weight" in losses and "--layers" not in losses


def test_the_signature_is_the_config():
    for api_name, stage in API_STAGES.items():
        params = inspect.signature(getattr(shrinkbert, api_name)).parameters
        for option in options(stage.config_class):
            if params[option.name].kind is inspect.Parameter.VAR_POSITIONAL:  # report(*artifacts)
                continue
            assert params[option.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert params[option.name].default == option.default
        if stage.model_fields:
            assert "tokenizer" in params
    # besides the stages: the artifact class and the two ways of putting a bundle to work
    assert sorted(API_STAGES) == sorted(n for n in shrinkbert.__all__ if n not in ("Artifact", "predict_corpus", "serve"))
    assert {s.name for s in API_STAGES.values()} <= set(STAGES)


def test_the_api_is_written_source_current_with_the_registry_and_help_costs_no_torch():
    from shrinkbert import codegen

    assert codegen.TARGET.read_text() == codegen.render(), "stale: run python -m shrinkbert.codegen"
    assert (codegen.TARGET.parent / "py.typed").is_file()
    # help() and inspect.signature read the written functions: nothing heavy is imported for them
    probe = ("import inspect, pydoc, sys, shrinkbert\n"
             "assert list(inspect.signature(shrinkbert.distill).parameters)[:2] == ['teacher', 'student']\n"
             "assert 'temperature: float = 2.0' in pydoc.render_doc(shrinkbert.distill, renderer=pydoc.plaintext)\n"
             "print(sorted(m for m in ('torch', 'transformers', 'datasets', 'sklearn') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:] or done.stdout


def test_every_stage_answers_help_from_its_config_without_torch():
    """`shrinkbert STAGE --help` builds its parser from the stage's Config in the room's configs.py:
    the heavy libraries stay unimported (so it answers in a fraction of a second, not 3-4 s)."""
    probe = ("import sys, contextlib, io\n"
             "from shrinkbert import cli\n"
             "from shrinkbert.stages import STAGES\n"
             "for name in STAGES:\n"
             "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
             "        try:\n"
             "            cli.main([name, '--help'])\n"
             "        except SystemExit as done:\n"
             "            assert done.code == 0, name\n"
             "    assert out.getvalue().startswith(f'usage: shrinkbert {name} '), name\n"
             "print(sorted(m for m in ('torch', 'transformers', 'datasets', 'sklearn', 'onnxruntime') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:] or done.stdout


def test_only_the_keywords_a_caller_names_reach_the_stage(monkeypatch):
    from shrinkbert import functions

    seen = {}
    monkeypatch.setattr(functions, "report_stage", lambda *artifacts, **kwargs: seen.update(kwargs) or seen)
    monkeypatch.setattr(functions, "run_stage", lambda name, **kwargs: seen.update(kwargs, stage=name) or seen)
    shrinkbert.report("a", "b", quick=True, runs=30)  # runs=30 is its default: left unset, for quick to fill
    assert seen == {"quick": True}
    seen.clear()
    shrinkbert.distill(teacher="t", layers=2, temperature=2.0, output_dir="out")
    assert seen == {"teacher": "t", "layers": 2, "output_dir": "out", "stage": "distill"}


def test_errors_name_the_keyword_from_python_and_the_flag_from_the_cli(tiny_bert, tmp_path):
    with pytest.raises(ShrinkbertError, match=r"^parity_rows= must be >= 1, got 0$"):
        shrinkbert.export(model=tiny_bert, output_dir=tmp_path / "x", parity_rows=0)
    with pytest.raises(TypeError, match=r"export\(\) got an unexpected keyword argument 'parity'"):  # a real signature
        shrinkbert.export(model=tiny_bert, output_dir=tmp_path / "x", parity=4)
    with pytest.raises(ShrinkbertError, match=r"^unknown keyword\(s\) for export: parity= \(known: "):  # run_stage
        run_stage("export", model=tiny_bert, output_dir=tmp_path / "x", parity=4)
    with pytest.raises(ShrinkbertError, match=r"^prune needs model= and output_dir=$"):  # the stage's own message
        shrinkbert.prune(output_dir="")
    with pytest.raises(ShrinkbertError, match=r"^approach= must be one of dynamic, static, int4, got 'fast'$"):
        shrinkbert.quantize(model=tmp_path, output_dir=tmp_path / "q", approach="fast")
    assert _cli_error(["export", "--model", str(tiny_bert), "--parity-rows", "0"]).strip() == \
        "error: --parity-rows must be >= 1, got 0"
    assert _cli_error(["prune"]).strip() == "error: prune needs --model and --output-dir"
    assert not (tmp_path / "x").exists()


def test_what_is_not_a_path_or_a_model_is_refused_in_one_line(tmp_path):
    with pytest.raises(ShrinkbertError, match=r"^model= takes a path, an Artifact or a transformers PreTrainedModel, "
                                              r"got object$"):
        shrinkbert.finetune(model=object(), output_dir=tmp_path / "t")
    with pytest.raises(ShrinkbertError, match=r"^teacher= takes a path"):
        shrinkbert.distill(teacher={"not": "a model"}, output_dir=tmp_path / "s")
    with pytest.raises(TypeError, match="unexpected keyword argument 'tokenizer'"):  # quantize reads no PyTorch model
        shrinkbert.quantize(model=tmp_path, tokenizer=object(), output_dir=tmp_path)
    with pytest.raises(ShrinkbertError, match="^quantize\\(\\): tokenizer= goes with an in-memory model"):
        run_stage("quantize", model=tmp_path, tokenizer=object(), output_dir=tmp_path)
    with pytest.raises(TypeError, match="positional argument"):  # keyword-only, as the CLI's flags
        shrinkbert.export("runs/student")
    assert not (tmp_path / "t").exists() and not (tmp_path / "t.inputs").exists()


def test_in_memory_models_through_finetune_distill_prune_and_export(tiny_bert, tiny_csv, cache_env, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    teacher = shrinkbert.finetune(model=model, tokenizer=tokenizer, task=tiny_csv, output_dir=tmp_path / "teacher",
                                  **TINY_TRAIN)
    assert teacher.stage == "finetune" and (tmp_path / "teacher.inputs" / "model" / "model.safetensors").is_file()
    assert teacher.manifest["config"]["model"] == str(tmp_path / "teacher.inputs" / "model")

    student = shrinkbert.distill(teacher=teacher.load(), tokenizer=teacher.tokenizer(), task=tiny_csv, layers=1,
                                 output_dir=tmp_path / "student", **TINY_TRAIN)
    assert student.stage == "distill" and student.manifest["config"]["teacher"] == str(tmp_path / "student.inputs" /
                                                                                         "teacher")

    pruned = shrinkbert.prune(model=student.load(), tokenizer=student.tokenizer(), task=tiny_csv,
                              head_fraction=0.5, importance_rows=16, max_eval_rows=16, max_length=32,
                              output_dir=tmp_path / "pruned")
    assert pruned.stage == "prune"
    onnx = shrinkbert.export(model=pruned.load(), tokenizer=pruned.tokenizer(), task=tiny_csv, parity_rows=8,
                             max_length=32, output_dir=tmp_path / "onnx")
    assert onnx.metrics["optimization"] == "O2" and onnx.metrics["parity"]["passed"]
    assert json.loads((tmp_path / "onnx" / "shrinkbert.json").read_text())["parents"][0]["path"].endswith(
        "onnx.inputs/model")


def test_export_then_quantize_with_no_options_take_the_fused_int8_path(tiny_bert, tmp_path):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        onnx = shrinkbert.export(model=tiny_bert, output_dir=tmp_path / "onnx", parity_rows=8)
    assert not [w for w in seen if w.category.__name__ == "TracerWarning"]  # silenced at the export call
    int8 = shrinkbert.quantize(model=onnx, output_dir=tmp_path / "int8")
    assert onnx.metrics["optimization"] == "O2" and int8.metrics["approach"] == "dynamic"
    assert int8.metrics["fused_graph"] is True and int8.metrics["quantized_nodes"] > 0


def test_progress_in_a_log_is_whole_lines_and_no_carriage_returns():
    log = io.StringIO()  # not a terminal
    bar = progress_bar(total=50, desc="train", file=log, mininterval=0)
    for _ in range(50):
        bar.update(1)
        bar.set_postfix(loss="0.1")
    bar.close()
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert lines[-1].startswith("train: 100%") and len(lines) <= 3  # the first, the last, none between


def test_unactionable_library_messages_are_dropped_only_inside_the_calls():
    logger = logging.getLogger("transformers.configuration_utils")
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "`torch_dtype` is deprecated! Use `dtype`",
                               None, None)
    with quiet_library_warnings():
        assert not logger.filter(record)
        assert logger.filter(logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "other", None, None))
    assert logger.filter(record)
