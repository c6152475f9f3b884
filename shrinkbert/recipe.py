"""The recipe runner: `shrinkbert run recipes/NAME.yaml` chains stages into one pipeline.

A recipe is a YAML file, or the name of one the kit ships (`shrinkbert run demo`: the wheel
carries the repository's recipes/ as shrinkbert/recipes, as torchtune's `tune run` does).

A recipe names stages and what each uses; `${other}` in a stage's parameters is the output
directory of stage `other`, which also makes it a dependency. Each stage runs in its own
process (`python -m MODULE --config FILE`, forked from the runner on Linux so that torch and
transformers are imported once, or `accelerate launch` for training stages on several processes)
and writes one artifact into OUTPUT_DIR/STAGE.

A stage whose module, parameters and parent artifacts are unchanged is skipped and its
artifact reused; a killed run, run again, skips what finished and the stage that was killed
resumes from its own last checkpoint. `--from STAGE` re-runs that stage and all after it.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shrinkbert.core.artifacts import is_artifact, read_manifest, safe_output_path
from shrinkbert.core.config import read_yaml
from shrinkbert.core.errors import ShrinkbertError, error_line
from shrinkbert import stage_process
from shrinkbert.stages import STAGES, TRAINING_STAGES, resolve

RECIPE_KEYS = {"name", "description", "output_dir", "seed", "launch", "stages", "quick"}
STAGE_KEYS = {"uses", "with", "after", "launch"}
LAUNCH_KEYS = {"processes", "config_file", "mixed_precision"}
STAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")
REFERENCE = re.compile(r"\$\{([^}]*)\}")
STATE_FILE = ".recipe-state.json"
# Keys the runner owns: a recipe may not point a stage's output anywhere else.
RESERVED_PARAMS = {"output_dir"}
# Other parameters a stage writes into: a recipe may set them, but only to a place inside the
# recipe's output directory (a relative path is taken relative to it), so no recipe, however it
# was made, can write elsewhere on the machine.
WRITE_PARAMS = {"cache_dir"}


@dataclass
class Stage:
    name: str
    uses: str
    params: dict[str, Any]
    depends_on: list[str]
    launch: dict[str, Any] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return resolve(self.uses).module


@dataclass
class Recipe:
    name: str
    output_dir: Path
    seed: int | None
    stages: list[Stage]  # in dependency order

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise ShrinkbertError(f"recipe '{self.name}' has no stage '{name}' (stages: {', '.join(s.name for s in self.stages)})")

    def out_dir(self, stage_name: str) -> Path:
        return safe_output_path(self.output_dir, stage_name)


def _references(value: Any) -> list[str]:
    if isinstance(value, str):
        return REFERENCE.findall(value)
    if isinstance(value, dict):
        return [ref for v in value.values() for ref in _references(v)]
    if isinstance(value, list):
        return [ref for v in value for ref in _references(v)]
    return []


def _substitute(value: Any, outputs: dict[str, Path]) -> Any:
    if isinstance(value, str):
        return REFERENCE.sub(lambda m: str(outputs[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: _substitute(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, outputs) for v in value]
    return value


def _check_keys(where: str, mapping: Any, allowed: set[str]) -> dict:
    if not isinstance(mapping, dict):
        raise ShrinkbertError(f"{where} must be a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(map(str, mapping)) - allowed)
    if unknown:
        raise ShrinkbertError(f"unknown key(s) in {where}: {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
    return mapping


def _check_launch(where: str, launch: Any) -> dict:
    launch = dict(_check_keys(where, launch or {}, LAUNCH_KEYS))
    if "processes" in launch and (not isinstance(launch["processes"], int) or isinstance(launch["processes"], bool)
                                  or launch["processes"] < 1):
        raise ShrinkbertError(f"{where}.processes must be a positive integer, got {launch['processes']!r}")
    return launch


def _order(stages: dict[str, Stage]) -> list[Stage]:
    """Topological order (recipe order among equals); a cycle is an error that names it."""
    ordered, state = [], {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = path[path.index(name):] + [name]
            raise ShrinkbertError(f"recipe stages form a cycle: {' -> '.join(cycle)}")
        state[name] = "visiting"
        for dep in stages[name].depends_on:
            visit(dep, path + [name])
        state[name] = "done"
        ordered.append(stages[name])

    for name in stages:
        visit(name, [])
    return ordered


def _apply_override(data: dict, assignment: str) -> None:
    """`--set stage.key=value` (value parsed as YAML) into the raw recipe mapping."""
    if "=" not in assignment or "." not in assignment.split("=", 1)[0]:
        raise ShrinkbertError(f"--set takes STAGE.KEY=VALUE, got {assignment!r}")
    target, raw = assignment.split("=", 1)
    stage_name, key = target.split(".", 1)
    stages = data.get("stages") or {}
    if stage_name not in stages:
        raise ShrinkbertError(f"--set names stage '{stage_name}', which the recipe does not have")
    stages[stage_name].setdefault("with", {})[key] = yaml.safe_load(raw)


def parse_recipe(data: Any, *, output_dir: str | Path | None = None, quick: bool = False,
                 overrides: list[str] = (), launch_config: str | Path | None = None,
                 base_dir: str | Path = ".") -> Recipe:
    """Validate a recipe mapping: keys, types, references and order; fail with one clear line."""
    data = _check_keys("recipe", data, RECIPE_KEYS)
    data = json.loads(json.dumps(data))  # a private deep copy we may edit
    if quick and data.get("quick"):
        for stage_name, extra in _check_keys("quick", data["quick"], set(data.get("stages") or {})).items():
            data["stages"][stage_name].setdefault("with", {}).update(_check_keys(f"quick.{stage_name}", extra, set(map(str, extra))))
    for assignment in overrides:
        _apply_override(data, assignment)
    raw_stages = data.get("stages")
    if not raw_stages:
        raise ShrinkbertError("recipe has no stages")
    _check_keys("stages", raw_stages, set(map(str, raw_stages)))
    recipe_launch = _check_launch("launch", data.get("launch"))
    if launch_config:  # the same recipe on another cluster: one Accelerate config for every training stage
        recipe_launch = {"config_file": str(Path(launch_config).resolve())}
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ShrinkbertError(f"recipe seed must be an integer, got {seed!r}")

    out = Path(output_dir or data.get("output_dir") or f"runs/{data.get('name', 'recipe')}").resolve()
    stages: dict[str, Stage] = {}
    for name, spec in raw_stages.items():
        name = str(name)
        if not STAGE_NAME.match(name):
            raise ShrinkbertError(f"stage name {name!r} must be letters, digits, '-' or '_'")
        spec = _check_keys(f"stage '{name}'", spec, STAGE_KEYS)
        uses = spec.get("uses")
        if not isinstance(uses, str) or not (uses in STAGES or re.match(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$", uses)):
            raise ShrinkbertError(f"stage '{name}': 'uses' must be one of {', '.join(STAGES)} "
                                  f"(or a dotted module path), got {uses!r}")
        params = _check_keys(f"stage '{name}'.with", spec.get("with") or {}, set(map(str, spec.get("with") or {})))
        reserved = RESERVED_PARAMS & set(params)
        if reserved:
            raise ShrinkbertError(f"stage '{name}': {', '.join(sorted(reserved))} is set by the runner "
                                  f"(every stage writes into OUTPUT_DIR/{name})")
        for key in sorted(WRITE_PARAMS & set(params)):
            if params[key]:
                try:
                    params[key] = str(safe_output_path(out, str(params[key])))
                except ShrinkbertError as err:
                    raise ShrinkbertError(f"stage '{name}': {key}: {err}") from None
        after = spec.get("after") or []
        if isinstance(after, str):
            after = [after]
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise ShrinkbertError(f"stage '{name}': 'after' must be a stage name or a list of them")
        depends_on = list(dict.fromkeys(after + _references(params)))
        launch = {**recipe_launch, **_check_launch(f"stage '{name}'.launch", spec.get("launch"))} \
            if uses in TRAINING_STAGES or spec.get("launch") else {}
        if launch_config and launch:
            launch = dict(recipe_launch)
        if launch.get("config_file"):
            launch["config_file"] = _launch_file(launch["config_file"], Path(base_dir), name)
        stages[name] = Stage(name, uses, dict(params), depends_on, launch)
    for stage in stages.values():
        for dep in stage.depends_on:
            if dep not in stages:
                raise ShrinkbertError(f"stage '{stage.name}' refers to '{dep}', which is not a stage of this recipe")
    return Recipe(str(data.get("name", "recipe")), out, seed, _order(stages))


def _launch_file(path: str, base_dir: Path, stage_name: str) -> str:
    """An Accelerate config file: as given, or relative to the recipe's own directory."""
    for candidate in (Path(path), base_dir / path):
        if candidate.is_file():
            return str(candidate.resolve())
    raise ShrinkbertError(f"stage '{stage_name}': Accelerate config file {path} not found "
                          f"(looked here and beside the recipe, in {base_dir})")


SHIPPED = Path(__file__).resolve().parent / "recipes"  # recipes/ in a checkout (a link), package data in a wheel


def shipped_recipes() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def find_recipe(recipe: str | Path) -> Path:
    """A recipe file as given, else the shipped recipe of that name (`demo` or `demo.yaml`)."""
    path = Path(recipe)
    if path.is_file():
        return path
    name = path.name[:-5] if path.name.endswith(".yaml") else path.name
    if path.parent == Path(".") and (SHIPPED / f"{name}.yaml").is_file():
        return SHIPPED / f"{name}.yaml"
    raise ShrinkbertError(f"recipe {recipe} not found: no such file, and the kit ships no recipe of that name "
                          f"(it ships {', '.join(shipped_recipes()) or 'none'})")


def load_recipe(path: str | Path, **kwargs) -> Recipe:
    """A recipe from its file or its shipped name (find_recipe)."""
    path = find_recipe(path)
    return parse_recipe(read_yaml(path), base_dir=path.resolve().parent, **kwargs)


# ---- running --------------------------------------------------------------------------------

def resolved_params(recipe: Recipe, stage: Stage) -> dict[str, Any]:
    outputs = {s.name: recipe.out_dir(s.name) for s in recipe.stages}
    params = _substitute(stage.params, outputs)
    params["output_dir"] = str(recipe.out_dir(stage.name))
    return params


def validate_params(recipe: Recipe, stage: Stage, params: dict[str, Any]) -> dict[str, Any]:
    """Check a stage's parameters against its Config dataclass before anything runs."""
    contract = resolve(stage.uses)
    try:
        config_cls = contract.config_class
    except ImportError as err:
        raise ShrinkbertError(f"stage '{stage.name}': cannot import {stage.module}: {err}") from None
    if config_cls is None:
        return params
    if recipe.seed is not None and "seed" not in params and "seed" in {f.name for f in dataclasses.fields(config_cls)}:
        params["seed"] = recipe.seed
    try:
        contract.make_config(params)
    except ShrinkbertError as err:
        raise ShrinkbertError(f"stage '{stage.name}' ({stage.uses}): {err}") from None
    return params


def is_finished(out_dir: Path) -> bool:
    return is_artifact(out_dir) or (out_dir / "report.json").is_file()


def output_identity(out_dir: Path) -> str:
    """What a downstream stage depends on: the artifact's content hash (or the report's bytes)."""
    if is_artifact(out_dir):
        return read_manifest(out_dir).get("hash", "")
    report = out_dir / "report.json"
    return hashlib.sha256(report.read_bytes()).hexdigest() if report.is_file() else ""


def stage_key(recipe: Recipe, stage: Stage, params: dict[str, Any]) -> str:
    parents = {dep: output_identity(recipe.out_dir(dep)) for dep in stage.depends_on}
    blob = json.dumps({"module": stage.module, "params": params, "parents": parents, "launch": stage.launch},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _read_state(recipe: Recipe) -> dict[str, str]:
    path = recipe.output_dir / STATE_FILE
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}  # a damaged state only costs re-running stages


def _write_state(recipe: Recipe, state: dict[str, str]) -> None:
    path = recipe.output_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, path)


def launch_command(stage: Stage, config_file: Path) -> tuple[list[str], dict[str, str]]:
    """The command line for one stage: plain python, or accelerate launch on several processes."""
    env = dict(os.environ)
    processes = int(stage.launch.get("processes", 1))
    if stage.launch.get("config_file"):
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(stage.launch["config_file"])]
    elif processes > 1:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1",
               "--num_processes", str(processes), "--dynamo_backend", "no",
               "--mixed_precision", str(stage.launch.get("mixed_precision", "no"))]
    else:
        return [sys.executable, "-m", stage.module, "--config", str(config_file)], env
    import torch  # deferred: only a multi-process launch needs to know about GPUs

    if not torch.cuda.is_available():
        # STACK.md: without this opt-in, CPU ranks train as unsynchronised copies, silently
        # (and `--cpu`/MULTI_CPU configs run one process): gloo over --multi_gpu is what works.
        env["ACCELERATE_USE_CPU"] = "true"
    return cmd + ["-m", stage.module, "--config", str(config_file)], env


def plan(recipe: Recipe, from_stage: str | None = None,
         to_stage: str | None = None) -> list[tuple[Stage, dict[str, Any], str]]:
    """Each stage with its parameters and what will happen: 'run', 'reuse' or 'forced'; with
    `to_stage`, only that stage and the stages it needs (the rest are left as they are)."""
    forced: set[str] = set()
    if from_stage:
        recipe.stage(from_stage)
        forced.add(from_stage)
        for stage in recipe.stages:  # dependency order: downstream stages follow their parents
            if forced & set(stage.depends_on):
                forced.add(stage.name)
    wanted: set[str] | None = None
    if to_stage:
        wanted = {recipe.stage(to_stage).name}
        for stage in reversed(recipe.stages):  # the same order backwards: parents after their children
            if stage.name in wanted:
                wanted.update(stage.depends_on)
    state = _read_state(recipe)
    rows = []
    for stage in recipe.stages:
        if wanted is not None and stage.name not in wanted:
            continue
        params = validate_params(recipe, stage, resolved_params(recipe, stage))
        out = recipe.out_dir(stage.name)
        upstream_changes = any(r[2] != "reuse" for r in rows if r[0].name in stage.depends_on)
        if stage.name in forced:
            action = "forced"
        elif not upstream_changes and is_finished(out) and state.get(stage.name) == stage_key(recipe, stage, params):
            action = "reuse"
        else:
            action = "run"
        rows.append((stage, params, action))
    return rows


def print_plan(recipe: Recipe, rows) -> None:
    print(f"recipe '{recipe.name}' -> {recipe.output_dir}")
    for i, (stage, params, action) in enumerate(rows, 1):
        after = f" after {', '.join(stage.depends_on)}" if stage.depends_on else ""
        procs = f" on {stage.launch['processes']} processes" if stage.launch.get("processes", 1) > 1 else ""
        if stage.launch.get("config_file"):
            procs = f" via accelerate launch --config_file {Path(stage.launch['config_file']).name}"
        print(f"  [{i}/{len(rows)}] {stage.name:<14} {stage.uses:<10} {action:<6}{after}{procs}")
        shown = {k: v for k, v in params.items() if k != "output_dir"}
        print(f"        {json.dumps(shown, default=str)}")


def format_stage_times(stage_times: list[tuple[str, str, float | None]], total: float) -> str:
    """The wall time of every stage of one run, so a budget can be checked stage by stage."""
    lines = ["stage times:", f"  {'stage':<20} {'uses':<11} {'seconds':>8} {'share':>6}"]
    for name, uses, seconds in stage_times:
        shown = "reused" if seconds is None else f"{seconds:8.0f}"
        share = "" if seconds is None or total <= 0 else f"{seconds / total:6.0%}"
        lines.append(f"  {name:<20} {uses:<11} {shown:>8} {share:>6}")
    return "\n".join(lines)


def run_recipe(recipe: Recipe, from_stage: str | None = None, dry_run: bool = False, fork: bool = False,
               to_stage: str | None = None) -> int:
    """Run the stages that are not up to date (with `to_stage`: of that stage and those it needs). fork:
    start them as forks of this process (the CLI's default on Linux); only safe from a process that has
    run no torch op yet (its thread pools)."""
    rows = plan(recipe, from_stage, to_stage)
    print_plan(recipe, rows)
    if dry_run:
        return 0
    recipe.output_dir.mkdir(parents=True, exist_ok=True)
    configs = recipe.output_dir / ".stages"
    configs.mkdir(exist_ok=True)
    state = _read_state(recipe)
    started = time.time()  # the total counts the preload too
    fork = fork and stage_process.can_fork()
    if fork and any(action != "reuse" for _, _, action in rows):
        stage_process.preload()  # once, here: each forked stage starts with the libraries imported
    stage_times: list[tuple[str, str, float | None]] = []
    for i, (stage, params, action) in enumerate(rows, 1):
        if action == "reuse":
            print(f"\n=== [{i}/{len(rows)}] {stage.name}: up to date, reusing {recipe.out_dir(stage.name)}")
            stage_times.append((stage.name, stage.uses, None))
            continue
        config_file = configs / f"{stage.name}.yaml"
        config_file.write_text(yaml.safe_dump(params, sort_keys=False))
        cmd, env = launch_command(stage, config_file)
        print(f"\n=== [{i}/{len(rows)}] {stage.name} ({stage.uses}) :: {' '.join(cmd[1:])}", flush=True)
        state.pop(stage.name, None)
        _write_state(recipe, state)
        stage_start = time.time()
        code = stage_process.run_stage_command(cmd, env, fork)
        if code != 0:
            raise ShrinkbertError(f"stage '{stage.name}' failed (exit {code}); fix it and run again: "
                                  f"finished stages are reused and '{stage.name}' resumes from its last checkpoint")
        if not is_finished(recipe.out_dir(stage.name)):
            raise ShrinkbertError(f"stage '{stage.name}' exited 0 but wrote no artifact into {recipe.out_dir(stage.name)}")
        state[stage.name] = stage_key(recipe, stage, params)
        _write_state(recipe, state)
        stage_times.append((stage.name, stage.uses, time.time() - stage_start))
        print(f"=== {stage.name} done in {stage_times[-1][2]:.0f} s", flush=True)
    total = time.time() - started
    print(f"\nrecipe '{recipe.name}' finished in {total:.0f} s ({total / 60:.1f} min); outputs in {recipe.output_dir}")
    print(format_stage_times(stage_times, total))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shrinkbert run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", help="a recipe YAML file (recipes/demo.yaml) or the name of one the kit ships: "
                                       + ", ".join(shipped_recipes()))
    parser.add_argument("--dry-run", action="store_true", help="print the plan (what runs, what is reused) and stop")
    parser.add_argument("--from", dest="from_stage", metavar="STAGE", help="re-run this stage and every stage after it")
    parser.add_argument("--to", dest="to_stage", metavar="STAGE",
                        help="run only this stage and the stages it needs (the teacher alone, say)")
    parser.add_argument("--quick", action="store_true", help="apply the recipe's `quick` overrides (a few-minute look)")
    parser.add_argument("--output-dir", help="where stage outputs go (default: the recipe's output_dir)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="STAGE.KEY=VALUE",
                        help="override one stage parameter; repeatable")
    parser.add_argument("--spawn", action="store_true",
                        help="start every stage in a fresh interpreter (default on Linux: a fork of this "
                             "runner, which has torch and transformers imported already)")
    parser.add_argument("--launch-config", metavar="FILE",
                        help="an Accelerate config file for every training stage (e.g. recipes/accelerate/cpu-2proc.yaml)")
    args = parser.parse_args(argv)
    try:
        output_dir = args.output_dir
        if args.quick and not output_dir:
            output_dir = str(Path(read_yaml(find_recipe(args.recipe)).get("output_dir") or "runs/recipe")) + "-quick"
        recipe = load_recipe(args.recipe, output_dir=output_dir, quick=args.quick, overrides=args.overrides,
                             launch_config=args.launch_config)
        return run_recipe(recipe, from_stage=args.from_stage, dry_run=args.dry_run, fork=not args.spawn,
                          to_stage=args.to_stage)
    except Exception as err:  # a user's error, a full disk or a refused folder: one line
        line = error_line(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
