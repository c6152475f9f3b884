"""The demo's edge chain with one distillation option changed in both of its distillations, arm by arm.

    python bench/edge_arms.py                                   # seeds 0..2: trained, frozen, no-dropout
    python bench/edge_arms.py --arms trained,no-dropout --seeds 2
    python bench/edge_arms.py --arms trained,no-dropout --seeds 0 --timing-rounds 3   # step times alone

For each seed, the chain recipes/demo.yaml runs for its edge student, in each arm: a 2-layer student at
the teacher's full width (H384) distilled for 2 epochs, half its heads and three quarters of its FFN
neurons cut (`shrinkbert prune`), the cut distilled again for 3 epochs (logits + hidden loss, 16,000
teacher-labelled IMDB sentences, lr 3e-4). Arm `trained` is the recipe with the student's own dropout
in place of its `dropout: 0.0` (seed 0: the demo's own student-wide, edge-cut and student-edge from
runs/demo where the demo ran that way); the others pass their option to both
distillations: `frozen` --freeze-embeddings (the word-embedding table kept as it starts), `no-dropout`
--dropout 0, `bf16-teacher` --dropout 0 --mixed-precision bf16 (on a bf16 host the students train in
bf16 under `auto` already: the teacher's cached outputs are what it changes), `wide-1-epoch` that and the wide
student distilled 1 epoch in place of 2 (the edge distillation as it is: recipes/demo.yaml's). The arms run in turn for each seed, so
their training times share the host's minute; a
chain already in --out is reused (an arm added later runs alone: its step times then come from
another minute than the reference's).

Scored as bench/edge_epochs.py scores (validation picks, test reports; retention mean ± sd over seeds,
each arm's difference to the first with a paired bootstrap 95% interval over the rows), and each
distillation's training time per step from its manifest. With --timing-rounds, each distillation also
runs --timing-steps steps in every arm, the arms alternated within each round, for step-time ratios of
runs a minute apart. The host's CPU and ISA are printed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edge_epochs import DISTILL, ROOT, edge_student, print_splits, score, shrinkbert, wide_and_cut  # noqa: E402  (one chain, one scorer)

# the recipe as it is (no dropout) with bf16 asked for by name: the students train in bf16 under `auto` on a
# bf16 host already, so what changes is the teacher's cached-output pass (students/distill.py)
BF16_TEACHER = ("--dropout", "0", "--mixed-precision", "bf16")
ARMS = {"trained": (), "frozen": ("--freeze-embeddings",), "no-dropout": ("--dropout", "0"),
        "bf16-teacher": BF16_TEACHER,
        # that arm with the wide student's 2 epochs cut to 1 (WIDE_ONLY): the demo's longest stage; the
        # edge distillation unchanged
        "wide-1-epoch": BF16_TEACHER}
WIDE_ONLY = {"wide-1-epoch": ("--epochs", "1")}  # options of the wide distillation alone, after the recipe's
STAGES = ("wide", "edge")


def chain(args, seed: int, arm: str) -> dict[str, Path]:
    """{stage: artifact} of one arm's chain for one seed, made where missing."""
    demo = Path(args.demo)
    if seed == 0 and arm == "trained" and _dropout_of(demo / "student-edge") is None:  # a demo made without `dropout: 0.0`
        made = {"wide": demo / "student-wide", "cut": demo / "edge-cut", "edge": demo / "student-edge"}
        if not (made["edge"] / "shrinkbert.json").is_file():
            raise SystemExit(f"error: {made['edge']} is missing: run `bash scripts/demo.sh` first")
        return made
    folder = Path(args.out) / f"s{seed}-{arm}"
    folder.mkdir(parents=True, exist_ok=True)
    wide, cut = wide_and_cut(args.teacher, folder, seed, extra=ARMS[arm] + WIDE_ONLY.get(arm, ()))
    edge = edge_student(args.teacher, cut, folder / "edge", 3, seed, log=folder / "edge.log", extra=ARMS[arm])
    return {"wide": wide, "cut": cut, "edge": edge}


def _dropout_of(artifact: Path):
    manifest = artifact / "shrinkbert.json"
    return json.loads(manifest.read_text())["config"].get("dropout") if manifest.is_file() else None


def step_ms(artifact: Path) -> float:
    metrics = json.loads((artifact / "shrinkbert.json").read_text())["metrics"]
    return 1000 * metrics["train_time_s"] / metrics["steps"]


def timed_run(args, arm: str, stage: str, round_: int) -> float:
    """ms a step of one short run (--timing-steps) of `stage`'s distillation in `arm`, seed 0: the
    wide one from the teacher, or the edge one from the demo's cut."""
    folder = Path(args.out) / "timing" / f"{stage}-{arm}-r{round_}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    start = (("--layers", "2", "--epochs", "2", *WIDE_ONLY.get(arm, ())) if stage == "wide" else
             ("--student", str(Path(args.demo) / "edge-cut"), "--epochs", "3"))
    shrinkbert("distill", "--teacher", args.teacher, *DISTILL, *ARMS[arm], *start, "--max-steps", str(args.timing_steps),
               "--checkpoint-every", "0", "--seed", "0", "--output-dir", str(folder), log=folder.with_suffix(".log"))
    return step_ms(folder)


def compare_steps(args, arms: list[str]) -> dict:
    """Each stage's short run in every arm, arms alternated within each of --timing-rounds rounds, so
    each ratio compares runs a minute apart: {stage: {arm: [ms a step per round]}}."""
    times = {stage: {arm: [] for arm in arms} for stage in STAGES}
    for round_ in range(args.timing_rounds):
        for stage in STAGES:
            for arm in arms:
                times[stage][arm].append(timed_run(args, arm, stage, round_))
    for stage in STAGES:
        line = f"{stage} distillation, {args.timing_steps} steps, ms a step by round: " + "; ".join(
            f"{arm} " + ", ".join(f"{ms:.0f}" for ms in times[stage][arm]) for arm in arms)
        for arm in arms[1:]:
            ratios = [r / a for r, a in zip(times[stage][arms[0]], times[stage][arm])]
            line += f"; {arms[0]}/{arm} {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
        print(line + " (median over the rounds)")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (0: no chains, timing only)")
    parser.add_argument("--demo", default=str(ROOT / "runs/demo"), help="the demo's output folder (its teacher, seed 0's chain)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)} (first: the reference)")
    parser.add_argument("--timing-rounds", type=int, default=0,
                        help="also time each distillation's first --timing-steps steps in every arm, arms alternated, this many rounds")
    parser.add_argument("--timing-steps", type=int, default=150)
    parser.add_argument("--out", default=str(ROOT / "runs/bench/edge-arms"), help="students and edge_arms.json")
    args = parser.parse_args()
    arms = args.arms.split(",")
    if unknown := [arm for arm in arms if arm not in ARMS]:
        raise SystemExit(f"error: unknown arm {unknown[0]!r}: one of {', '.join(ARMS)}")
    args.teacher = str(Path(args.demo) / "teacher")
    from shrinkbert.core.device import describe_machine

    results = {"machine": describe_machine(), "arms": arms, "seeds": args.seeds}
    print(f"machine: {results['machine']}", flush=True)
    if args.seeds:
        results.update(compare_chains(args, arms))
    if args.timing_rounds:
        results["timing"] = {"steps": args.timing_steps, "ms_a_step": compare_steps(args, arms)}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "edge_arms.json").write_text(json.dumps(results, indent=2))


def compare_chains(args, arms: list[str]) -> dict:
    """Every arm's chain for each seed, scored; each distillation's ms a step from its manifest."""
    chains = {arm: [] for arm in arms}
    for seed in range(args.seeds):
        for arm in arms:
            chains[arm].append(chain(args, seed, arm))
            print(f"seed {seed}, {arm}: {chains[arm][-1]['edge']}", flush=True)
    made = {arm: [c["edge"] for c in arm_chains] for arm, arm_chains in chains.items()}
    results = {"step_ms": {arm: {stage: [step_ms(c[stage]) for c in arm_chains] for stage in STAGES}
                           for arm, arm_chains in chains.items()},
               "splits": [score(made, args.teacher, split) for split in ("validation", "test")]}
    for stage in STAGES:
        times = results["step_ms"]
        line = f"{stage} distillation, ms a step: " + "; ".join(
            f"{arm} " + ", ".join(f"{ms:.0f}" for ms in times[arm][stage]) for arm in arms)
        for arm in arms[1:]:
            # seed 0's trained chain ran in the demo, not beside its twins: the ratio pairs the seeds run here
            paired = [(r, a) for seed, (r, a) in enumerate(zip(times[arms[0]][stage], times[arm][stage]))
                      if seed > 0 or args.seeds == 1]
            line += f"; {arms[0]}/{arm} {statistics.median(r / a for r, a in paired):.2f}x"
        print(line + " (median over the seeds run here)")
    print_splits(results["splits"], args.seeds, str)
    return results


if __name__ == "__main__":
    sys.exit(main())
