"""The recipe runner: plan, skip-if-unchanged, --from, --to, kill and resume, bad recipes."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shrinkbert.core.errors import ShrinkbertError
from shrinkbert.recipe import load_recipe, main, parse_recipe, plan, run_recipe

ROOT = Path(__file__).resolve().parents[1]


def chain(sleep_b: float = 0.0) -> dict:
    return {
        "name": "chain",
        "stages": {
            "a": {"uses": "tests.fake_stage", "with": {"value": 1}},
            "b": {"uses": "tests.fake_stage", "with": {"parent": "${a}", "value": 10, "sleep": sleep_b}},
            "c": {"uses": "tests.fake_stage", "with": {"parent": "${b}", "value": 100}},
        },
    }


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("FAKE_STAGE_LOG", str(tmp_path / "log.txt"))
    return tmp_path


def runs(tmp_path) -> list[str]:
    log = tmp_path / "log.txt"
    return log.read_text().split() if log.exists() else []


def total(out: Path, stage: str) -> int:
    return int((out / stage / "total.txt").read_text())


def test_runs_in_order_then_reuses_everything(env):
    recipe = parse_recipe(chain(), output_dir=env / "out")
    assert [s.name for s in recipe.stages] == ["a", "b", "c"]
    run_recipe(recipe)
    assert total(env / "out", "c") == 111
    assert runs(env) == ["a", "b", "c"]
    assert [action for _, _, action in plan(recipe)] == ["reuse"] * 3
    run_recipe(recipe)
    assert runs(env) == ["a", "b", "c"]


def test_changed_parameter_reruns_that_stage_and_downstream_only(env):
    run_recipe(parse_recipe(chain(), output_dir=env / "out"))
    data = chain()
    data["stages"]["b"]["with"]["value"] = 20
    recipe = parse_recipe(data, output_dir=env / "out")
    assert [action for _, _, action in plan(recipe)] == ["reuse", "run", "run"]
    run_recipe(recipe)
    assert total(env / "out", "c") == 121
    assert runs(env) == ["a", "b", "c", "b", "c"]


def test_from_stage_forces_it_and_what_follows(env):
    recipe = parse_recipe(chain(), output_dir=env / "out")
    run_recipe(recipe)
    assert [action for _, _, action in plan(recipe, from_stage="b")] == ["reuse", "forced", "forced"]
    with pytest.raises(ShrinkbertError, match="no stage 'zz'"):
        plan(recipe, from_stage="zz")


def test_to_stage_runs_it_and_what_it_needs_only(env):
    recipe = parse_recipe(chain(), output_dir=env / "out")
    assert [stage.name for stage, _, _ in plan(recipe, to_stage="b")] == ["a", "b"]
    run_recipe(recipe, to_stage="b")
    assert runs(env) == ["a", "b"] and not (env / "out" / "c").exists()
    assert [action for _, _, action in plan(recipe)] == ["reuse", "reuse", "run"]
    with pytest.raises(ShrinkbertError, match="no stage 'zz'"):
        plan(recipe, to_stage="zz")


def test_dry_run_writes_nothing(env, capsys):
    path = env / "r.yaml"
    path.write_text(yaml.safe_dump(chain()))
    assert main([str(path), "--dry-run", "--output-dir", str(env / "out")]) == 0
    assert "[3/3] c" in capsys.readouterr().out
    assert not (env / "out").exists()


def test_killed_inside_a_stage_resumes_without_redoing_finished_ones(env):
    path = env / "r.yaml"
    path.write_text(yaml.safe_dump(chain(sleep_b=30)))
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir", str(env / "out")]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    deadline = time.time() + 120
    # kill only once b is inside its write (its partial directory exists), not before it starts
    while not list((env / "out").glob(".partial-b-*")) and time.time() < deadline:
        time.sleep(0.1)
    assert runs(env) == ["a", "b"] and list((env / "out").glob(".partial-b-*")), "b never started writing"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (env / "out" / "b").exists(), "a killed stage must leave no artifact"
    path.write_text(yaml.safe_dump(chain()))  # same stages, b no longer slow
    assert subprocess.call(cmd, cwd=ROOT, timeout=240) == 0
    assert runs(env) == ["a", "b", "b", "c"]
    assert total(env / "out", "c") == 111
    assert not list((env / "out").glob(".partial-*"))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["stages"]["a"].update(colour="red"), "unknown key"),
    (lambda d: d.update(stagez={}), "unknown key"),
    (lambda d: d["stages"]["a"]["with"].update(value="many"), "must be int"),
    (lambda d: d["stages"]["a"]["with"].update(nonsense=1), "unknown config key"),
    (lambda d: d["stages"]["a"]["with"].update(parent="${c}"), "cycle"),
    (lambda d: d["stages"]["a"]["with"].update(parent="${nowhere}"), "not a stage"),
    (lambda d: d["stages"]["a"]["with"].update(output_dir="/etc"), "set by the runner"),
    (lambda d: d["stages"]["a"]["with"].update(cache_dir="/etc/cache"), "escapes the output directory"),
    (lambda d: d["stages"]["a"]["with"].update(cache_dir="../../cache"), "escapes the output directory"),
    (lambda d: d["stages"].update({"../up": {"uses": "tests.fake_stage"}}), "stage name"),
    (lambda d: d["stages"]["a"].update(uses="rm -rf"), "'uses' must be"),
    (lambda d: d.update(seed="x"), "seed must be an integer"),
    (lambda d: d.update(launch={"processes": 0}), "positive integer"),
])
def test_impossible_recipes_fail_with_one_line_before_running(env, mutate, message):
    data = chain()
    mutate(data)
    with pytest.raises(ShrinkbertError, match=message) as err:
        recipe = parse_recipe(data, output_dir=env / "out")
        plan(recipe)
    assert "\n" not in str(err.value)
    assert runs(env) == []


def test_a_recipe_cache_dir_is_placed_inside_the_output_directory(env):
    data = chain()
    data["stages"]["a"]["with"]["cache_dir"] = "cache"
    recipe = parse_recipe(data, output_dir=env / "out")
    assert recipe.stage("a").params["cache_dir"] == str((env / "out" / "cache").resolve())


def test_cli_prints_one_error_line_and_exits_2(env, capsys):
    path = env / "r.yaml"
    path.write_text("stages: [unclosed")
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_shipped_recipes_parse():
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        for quick in (False, True):
            recipe = load_recipe(path, quick=quick)
            assert recipe.stages, path


def test_a_shipped_recipe_runs_by_name_and_an_unknown_name_is_one_line(tmp_path, monkeypatch, capsys):
    """`shrinkbert run demo` is recipes/demo.yaml from any directory; a file of that name in the working
    directory wins (a user's own recipe is never shadowed); a name the kit does not ship lists those it does."""
    from shrinkbert.recipe import find_recipe, shipped_recipes

    monkeypatch.chdir(tmp_path)
    assert find_recipe("demo").resolve() == (ROOT / "recipes" / "demo.yaml").resolve()
    assert find_recipe("squad.yaml").resolve() == (ROOT / "recipes" / "squad.yaml").resolve()
    by_name, by_file = load_recipe("demo"), load_recipe(ROOT / "recipes" / "demo.yaml")
    assert [s.name for s in by_name.stages] == [s.name for s in by_file.stages]
    assert by_name.stages[-1].params == by_file.stages[-1].params
    (tmp_path / "demo").write_text("name: mine\nstages:\n  t: {uses: finetune, with: {model: minilm, task: imdb}}\n")
    assert load_recipe("demo").name == "mine"
    assert set(shipped_recipes()) >= {"demo", "squad", "embeddings", "mpnet-movies"}
    assert main(["no-such-recipe", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: recipe no-such-recipe not found") and "demo" in err and "\n" not in err
    with pytest.raises(ShrinkbertError, match="not found"):
        find_recipe("elsewhere/demo.yaml")  # a path is a path: never swapped for a shipped recipe


values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                      max_leaves=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=values)
def test_fuzzed_recipes_parse_or_fail_cleanly(tmp_path, data):
    try:
        parse_recipe(data, output_dir=tmp_path)
    except ShrinkbertError as err:
        assert str(err)


# Near-valid recipes: real stage kinds, real and misspelt parameter names, references to other
# stages (cycles included) and values of every type, so the fuzz reaches the checks past the
# first key test; each must plan or fail with one ShrinkbertError line, never another exception.
STAGE_KINDS = ["finetune", "distill", "prune", "export", "quantize", "bundle", "eval", "sparsify", "nope"]
PARAM_NAMES = ["model", "teacher", "task", "epochs", "batch_size", "learning_rate", "target", "layers",
               "head_fraction", "sparsity", "mode", "artifacts", "cache_dir", "output_dir", "colour"]
NAMES = ["a", "b", "c"]
param_values = (st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=True)
                | st.sampled_from(["${a}", "${b}", "${zz}", "25%", "4ms", "dynamic", "../x", "/etc", ""])
                | st.lists(st.sampled_from(["${a}", "${c}", "x"]), max_size=3))
stage_specs = st.fixed_dictionaries({"uses": st.sampled_from(STAGE_KINDS)},
                                    optional={"with": st.dictionaries(st.sampled_from(PARAM_NAMES), param_values,
                                                                      max_size=4),
                                              "after": st.sampled_from(NAMES) | st.lists(st.sampled_from(NAMES)),
                                              "launch": st.fixed_dictionaries({}, optional={
                                                  "processes": st.integers(-1, 3) | st.text(max_size=2)})})
near_recipes = st.fixed_dictionaries({"stages": st.dictionaries(st.sampled_from(NAMES), stage_specs, max_size=3)},
                                     optional={"seed": st.integers() | st.text(max_size=2), "name": st.text(max_size=5)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=near_recipes)
def test_fuzzed_near_valid_recipes_plan_or_fail_in_one_line(tmp_path, data):
    try:
        plan(parse_recipe(data, output_dir=tmp_path / "out"))
    except ShrinkbertError as err:
        assert str(err) and "\n" not in str(err)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("quick", [False, True])
def test_demo_recipe_plans_every_stage(quick, tmp_path):
    """The demo's own recipe, planned as `shrinkbert run recipes/demo.yaml [--quick] --dry-run` would:
    every stage's parameters pass its Config's checks, every reference names a stage upstream."""
    recipe = load_recipe(ROOT / "recipes" / "demo.yaml", output_dir=tmp_path / "demo", quick=quick)
    rows = plan(recipe)
    names = [stage.name for stage, _, _ in rows]
    assert names[0] == "mlm" and names[-1] == "report" and {"teacher", "edge-int8", "bundle"} <= set(names)
    assert all(action == "run" for _, _, action in rows)
    outputs = {str(tmp_path / "demo" / name) for name in names}
    for position, (stage, params, _) in enumerate(rows):
        assert set(stage.depends_on) <= set(names[:position]), stage.name
        assert params["output_dir"] == str(tmp_path / "demo" / stage.name)
        refs = [v for v in params.values() if isinstance(v, str) and v.startswith(str(tmp_path))]
        assert set(refs) <= outputs, (stage.name, refs)
    params = {stage.name: p for stage, p, _ in rows}
    if quick:
        assert params["teacher"]["epochs"] == 1 and params["report"]["quick"] is True
    else:
        assert "quick" not in params["report"] or params["report"]["quick"] is False
    assert not (tmp_path / "demo").exists() or not any((tmp_path / "demo").iterdir())  # planning writes nothing


@pytest.mark.parametrize("path", ["recipes/ner.yaml", "recipes/pos.yaml", "recipes/movie-full.yaml",
                                  "bench/targets.yaml", "bench/squad_heads.yaml"])
def test_every_shipped_recipe_plans(path, tmp_path):
    """Each recipe the README names passes every stage's Config checks (and its --quick block, if any)."""
    for quick in (False, True):
        recipe = load_recipe(ROOT / path, output_dir=tmp_path / f"out-{quick}", quick=quick)
        rows = plan(recipe)
        assert rows and rows[-1][0].name == "report"
        assert all(action == "run" for _, _, action in rows)


def test_the_qa_heads_bench_runs_the_qa_recipes_own_stages():
    """bench/squad_heads.yaml copies recipes/squad.yaml's stages before its extra branch: they must not drift."""
    bench = yaml.safe_load((ROOT / "bench/squad_heads.yaml").read_text())["stages"]
    recipe = yaml.safe_load((ROOT / "recipes/squad.yaml").read_text())["stages"]
    assert {name: bench[name] for name in recipe if name != "report"} == {
        name: stage for name, stage in recipe.items() if name != "report"}
    assert set(recipe["report"]["with"]["artifacts"]) <= set(bench["report"]["with"]["artifacts"])


@pytest.mark.parametrize("spawn", [False, True])
def test_cli_stages_forked_or_spawned_give_the_same_outputs_and_report_a_failure(env, spawn):
    path = env / "r.yaml"
    path.write_text(yaml.safe_dump(chain()))
    cmd = [sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir", str(env / "out")]
    cmd += ["--spawn"] if spawn else []
    assert subprocess.call(cmd, cwd=ROOT, timeout=240) == 0
    assert total(env / "out", "c") == 111 and runs(env) == ["a", "b", "c"]
    failing = chain()
    failing["stages"]["b"]["with"]["fail"] = True
    path.write_text(yaml.safe_dump(failing))
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2
    assert "RuntimeError: fake stage asked to fail" in done.stderr  # the stage's own traceback
    assert done.stderr.strip().splitlines()[-1].startswith("error: stage 'b' failed (exit 1)")
    assert runs(env) == ["a", "b", "c"], "a failed stage must not run what follows"


def test_a_forked_stage_gets_the_given_environment_and_exit_code(tmp_path, monkeypatch):
    from shrinkbert import stage_process

    if not stage_process.can_fork():
        pytest.skip("stages are forked on Linux only")
    module = tmp_path / "exit_with_env.py"
    module.write_text("import os, sys\n\n\ndef main(argv):\n    return int(os.environ['EXIT_WITH']) + int(argv[0])\n\n\n"
                      "if __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert stage_process.run_forked("exit_with_env", ["1"], {**os.environ, "EXIT_WITH": "4"}) == 5
    assert "EXIT_WITH" not in os.environ, "the child's environment must not leak into the runner"
    cmd = [sys.executable, "-m", "exit_with_env", "0"]
    env = {**os.environ, "EXIT_WITH": "3", "PYTHONPATH": str(tmp_path)}
    assert stage_process.run_stage_command(cmd, env, fork=True) == 3 == stage_process.run_stage_command(cmd, env, fork=False)


def test_a_stage_past_the_stage_timeout_is_killed_and_reported(env):
    path = env / "r.yaml"
    path.write_text(yaml.safe_dump(chain(sleep_b=60)))
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir", str(env / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SHRINKBERT_STAGE_TIMEOUT": "3"})
    assert done.returncode != 0 and time.time() - started < 50
    assert "ran past 3 s" in done.stderr and "exit 124" in done.stderr
    assert runs(env) == ["a", "b"] and not (env / "out" / "b").exists()


def test_a_killed_runner_takes_its_forked_stage_with_it(env):
    """A runner killed from above (a test's timeout) leaves no stage running on (PR_SET_PDEATHSIG)."""
    path = env / "r.yaml"
    path.write_text(yaml.safe_dump(chain(sleep_b=60)))
    proc = subprocess.Popen([sys.executable, "-m", "shrinkbert.cli", "run", str(path), "--output-dir",
                             str(env / "out")], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list((env / "out").glob(".partial-b-*")) and time.time() < deadline:
        time.sleep(0.1)
    children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert children, "the stage was not forked"
    proc.kill()  # the runner only, as subprocess.run's timeout does
    proc.wait(timeout=60)
    time.sleep(1)
    alive = [pid for pid in children if Path(f"/proc/{pid}").exists()
             and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"]
    assert not alive, f"stage process(es) {alive} outlived the runner"
