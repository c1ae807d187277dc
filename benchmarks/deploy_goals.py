"""The deployment goals of issue 58 in one table, printed by benchmarks/bench_deploy.py: path, now
(measured in this run), goal, met, anchor.

- per registered microcontroller target (`quarl.deploy.edge.targets.TARGETS`): the instructions per
  int8 action of the tuned PPO CartPole 64x64 policy's C policy under QEMU (deterministic) and per
  multiply-accumulate, its actions checked against the integer reference, beside CMSIS-NN's
  `arm_fully_connected_s8` counted on the same harness for the same layer shapes
  (benchmarks/deploy_anchors.py); and the int4 Huffman-coded policy on the Cortex-M4 against its
  int8 count;
- the host: the C policy called from Python (a CPython function, or ctypes) against ONNX Runtime int8,
  batch 1, one thread, timed side by side (the latency table's `c` and `onnx_int8` rows);
- evaluation: quarl's evaluator against SB3's `evaluate_policy` with the same 4 envs
  (benchmarks/bench_foundation.py's measure): the tuned CartPole policy, and in a full run an
  untrained DQN Nature CNN on Pong where ale-py is installed.

`python benchmarks/bench_deploy.py --quick` measures the goals alone (the one policy from quarl's
cache, a minute or two); a full run prints the same table after the others.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Sequence

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
GOAL_NETWORK = "PPO CartPole-v1 (tuned 64x64)"
RECORD = "default run's 8-bit PTQ record"  # the policy the goals are counted on
RECORD_FILTERS = ("algo=ppo", "env=cartpole", "quant=ptq", "quant.bits=8")  # `quarl export`'s filters for it
INT8, HUFFMAN = "c", "c [int4 huffman]"  # the C policies' names in bench_deploy's tables


@dataclass(frozen=True)
class TargetGoal:
    """What a target's int8 action should cost: at most `limit` instructions, `per_mac` per MAC, and
    (`below_anchor`) fewer per MAC than CMSIS-NN's kernel on the same core; always bit-exact."""

    text: str
    limit: Optional[float] = None
    per_mac: Optional[float] = None
    below_anchor: bool = False


TARGET_GOALS = {
    "riscv32": TargetGoal("<= 27,000 (6/MAC), below CMSIS-NN's pure C", limit=27_000, below_anchor=True),
    "cortex-m0": TargetGoal("exists, bit-exact; <= 9/MAC", per_mac=9.0),
    "cortex-m3": TargetGoal("<= 27,000", limit=27_000),
    "cortex-m4": TargetGoal("keep <= 8,000", limit=8_000),
}
HUFFMAN_TARGET, HUFFMAN_RATIO = "cortex-m4", 3.0  # int4 Huffman-coded <= 3x int8's instructions
HOST_GOAL = 15.0  # C policy vs ONNX Runtime int8, batch 1
EVALUATION_GOALS = {"CartPole": 8.0, "Pong": 4.0}  # quarl's evaluator vs SB3's evaluate_policy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """bench_deploy's options for the goals table."""
    from deploy_anchors import CMSIS_NN

    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the goals table alone ({GOAL_NETWORK}: targets, anchors, host, evaluation)",
    )
    parser.add_argument(
        "--cmsis-nn",
        type=Path,
        default=CMSIS_NN,
        help="a CMSIS-NN checkout for the anchors (default: the copy in benchmarks/anchors)",
    )
    parser.add_argument("--eval-repeats", type=int, default=3, help="interleaved evaluation timings per side")
    parser.add_argument("--pong", action="store_true", help="with --quick: the Pong evaluation row too (about 2 min)")
    parser.add_argument(
        "--goal-record",
        default=" ".join(RECORD_FILTERS),
        help="`quarl export` filters of the record whose C policy the target goals count",
    )


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def anchor_text(anchor: Any) -> str:
    """CMSIS-NN's count on a target, or why there is none."""
    if isinstance(anchor, str):
        return f"n/a ({anchor})"
    return f"CMSIS-NN {anchor.kernel}: {anchor.instructions:,.0f} ({anchor.per_mac:.2f}/MAC, {anchor.optimize})"


def _exact(row: dict[str, Any]) -> tuple[bool, str]:
    """Whether every checked action equalled the reference, and the row's 'n of m'."""
    same, _, of = row["actions as the reference under QEMU"].partition(" of ")
    return same == of, row["actions as the reference under QEMU"]


def target_rows(
    rows: Sequence[dict[str, Any]], anchors: dict[str, Any], network: str, label: str
) -> list[dict[str, Any]]:
    """One goal row per registered target (the int8 policy `network`'s count, per MAC, bit-exactness,
    CMSIS-NN beside it), then its int4 Huffman-coded policy against int8 on HUFFMAN_TARGET; `label`
    names the policy in the path column."""
    from quarl.deploy.edge.targets import TARGETS

    measured = {(r["target"], r["C policy"]): r for r in rows if r["network"] == network}
    out = []
    for name, target in TARGETS.items():
        goal = TARGET_GOALS.get(name, TargetGoal("no goal set"))
        anchor = anchors.get(name, "not counted")
        row = measured.get((target.title, INT8))
        path = f"`{name}` int8 action, {label}"
        if row is None:
            out.append(
                {
                    "path": path,
                    "now": "not measured (tools missing, or the network not run)",
                    "goal": goal.text,
                    "met": "no",
                    "anchor": anchor_text(anchor),
                }
            )
            continue
        count, per_mac = float(row["instructions / action"]), float(row["instructions / MAC"])
        exact, checked = _exact(row)
        met = exact and (goal.limit is None or count <= goal.limit)
        met = met and (goal.per_mac is None or per_mac <= goal.per_mac)
        if goal.below_anchor:
            met = met and not isinstance(anchor, str) and per_mac < anchor.per_mac
        out.append(
            {
                "path": path,
                "now": f"{count:,.0f} ({per_mac:.2f}/MAC; {checked} as the reference)",
                "goal": goal.text,
                "met": _yes(met),
                "anchor": anchor_text(anchor),
            }
        )
    huffman_target = TARGETS.get(HUFFMAN_TARGET)
    if huffman_target is not None:
        int8 = measured.get((huffman_target.title, INT8))
        coded = measured.get((huffman_target.title, HUFFMAN))
        path = f"`{HUFFMAN_TARGET}` int4 Huffman action, {label}"
        goal = f"<= {HUFFMAN_RATIO:g}x int8's count"
        if int8 is None or coded is None:
            out.append({"path": path, "now": "not measured", "goal": goal, "met": "no", "anchor": ""})
        else:
            ratio = float(coded["instructions / action"]) / float(int8["instructions / action"])
            exact, checked = _exact(coded)
            out.append(
                {
                    "path": path,
                    "now": f"{float(coded['instructions / action']):,.0f} ({ratio:.2f}x int8; "
                    f"{checked} as the reference)",
                    "goal": goal,
                    "met": _yes(exact and ratio <= HUFFMAN_RATIO),
                    "anchor": f"int8: {float(int8['instructions / action']):,.0f}",
                }
            )
    return out


def export_rows(filters: Sequence[str], macs: int) -> Any:
    """The targets' rows of the record `filters` selects, as `quarl export --format c` measures them (its
    measures.json: instructions per action per target; an export is refused unless every checked state
    and probe is the reference's), int8 and int4 Huffman-coded; or one sentence why none."""
    from quarl.deploy.edge.export import FIRMWARE_CHECK_STATES
    from quarl.deploy.edge.targets import TARGETS

    quarl = Path(sys.executable).with_name("quarl")
    rows: list[dict[str, Any]] = []
    for policy, options in ((INT8, []), (HUFFMAN, ["--precision", "int4", "--weight-coding", "huffman"])):
        with tempfile.TemporaryDirectory(prefix="quarl-goals-") as tmp:
            out = Path(tmp) / "policy"
            cmd = [
                str(quarl if quarl.exists() else "quarl"),
                "export",
                *filters,
                "--format",
                "c",
                *options,
                "--out",
                str(out),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
            if done.returncode != 0:
                return f"`{' '.join(cmd[1:-2])}` failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
            measures = json.loads((out / "measures.json").read_text())
        checked = f"{FIRMWARE_CHECK_STATES + measures['probes']} of {FIRMWARE_CHECK_STATES + measures['probes']}"
        for name, m in measures["firmware"].items():
            rows.append(
                {
                    "network": RECORD,
                    "C policy": policy,
                    "target": TARGETS[name].title,
                    "instructions / action": m["instructions"],
                    "instructions / MAC": m["instructions"] / macs,
                    "actions as the reference under QEMU": checked,
                    "cell": measures["origin"]["quarl.cell_key"],
                }
            )
    return rows


def host_row(table: Optional[pd.DataFrame], network: str) -> dict[str, Any]:
    """The C policy called from Python (`c`) against `onnx_int8`, both batch 1 in the latency table."""
    path, goal = "host: C policy vs ONNX Runtime int8, batch 1", f">= {HOST_GOAL:g}x"
    here = table[table.network == network] if table is not None and len(table) else None
    if here is None:
        return {"path": path, "now": "not measured", "goal": goal, "met": "no", "anchor": ""}
    c = here[(here.backend == "c") & (here.policy == "fp32 -> full int8")]
    ort = here[(here.backend == "onnx_int8") & (here.policy == "fp32")]
    native = here[(here.backend == "c (native)") & (here.policy == "fp32 -> full int8")]
    if not len(c) or not len(ort):
        return {
            "path": path,
            "now": "not measured (no host cc or ONNX Runtime row)",
            "goal": goal,
            "met": "no",
            "anchor": "",
        }
    c_us, ort_us = float(c["median ms"].iloc[0]) * 1e3, float(ort["median ms"].iloc[0]) * 1e3
    in_c = f"; {float(native['median ms'].iloc[0]) * 1e3:.3g} us timed in C" if len(native) else ""
    return {
        "path": path,
        "now": f"{ort_us / c_us:.1f}x ({c_us:.3g} us called from Python{in_c})",
        "goal": goal,
        "met": _yes(ort_us / c_us >= HOST_GOAL),
        "anchor": f"ONNX Runtime int8: {ort_us:.3g} us",
    }


def evaluation_rows(model: Any, episodes: int, repeats: int, pong: bool) -> list[dict[str, Any]]:
    """quarl's evaluator vs SB3's evaluate_policy (bench_foundation's `_eval_rows`, 4 envs each): `model`
    on CartPole, and with `pong` an untrained DQN Nature CNN on Pong (4 episodes) where ale-py is."""
    import torch
    from bench_foundation import CARTPOLE, PONG, _eval_rows
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from quarl.rl.envs import make_env

    torch.set_num_threads(1)
    cases: dict[str, Any] = {}
    if model is not None:
        cases["CartPole"] = _eval_rows(
            f"{GOAL_NETWORK}, {episodes} episodes",
            model,
            CARTPOLE,
            lambda: make_vec_env("CartPole-v1", n_envs=4, seed=0),
            episodes,
            repeats,
        )
    if pong and importlib.util.find_spec("ale_py") is not None:
        cnn = DQN("CnnPolicy", make_env(PONG), seed=0, device="cpu", buffer_size=1000)
        cases["Pong"] = _eval_rows(
            "DQN Nature CNN, Pong (untrained), 4 episodes",
            cnn,
            PONG,
            lambda: DummyVecEnv([lambda: make_env(PONG)] * 4),
            4,
            repeats,
            lambda: SubprocVecEnv([lambda: make_env(PONG)] * 4),
        )
    out = []
    for env, goal in EVALUATION_GOALS.items():
        path, goal_text = f"evaluation vs SB3 `evaluate_policy`, {env}", f">= {goal:g}x"
        if env not in cases:
            why = "not run" if env != "Pong" else ("ale-py is not installed" if pong else "not run: --quick without --pong")
            out.append({"path": path, "now": why, "goal": goal_text, "met": "no", "anchor": ""})
            continue
        ours = next(r for r in cases[env] if "quarl evaluate, " in r["what"])
        sb3 = next(r for r in cases[env] if r["what"].endswith("SB3 evaluate_policy, 4 envs"))
        gym_envs = [r for r in cases[env] if "Gymnasium's envs" in r["what"]]  # without quarl's exact env
        on_gym = f"; on Gymnasium's envs {gym_envs[0]['ratio to SB3']:.2f}x" if gym_envs else ""
        out.append(
            {
                "path": path,
                "now": f"{ours['ratio to SB3']:.2f}x ({ours['episodes/s']:.3g} episodes/s; "
                f"rewards = predict path: {ours['rewards = predict path']}{on_gym})",
                "goal": goal_text,
                "met": _yes(ours["ratio to SB3"] >= goal),
                "anchor": f"SB3: {sb3['episodes/s']:.3g} episodes/s",
            }
        )
    return out


def layer_widths(net: Any) -> list[int]:
    """The widths of a policy's layer stack (4, 64, 64, 2 for the 64x64 CartPole policy)."""
    from quarl.quantize.weights import LAYER_TYPES

    layers = [m for m in net.body.modules() if isinstance(m, LAYER_TYPES)]
    return [int(layers[0].weight.shape[1]), *(int(m.weight.shape[0]) for m in layers)]


def goals_table(
    rows: Sequence[dict[str, Any]],
    table: Optional[pd.DataFrame],
    model: Any,
    widths: Sequence[int],
    args: argparse.Namespace,
    pong: bool,
) -> pd.DataFrame:
    """Every goal row: the targets (and their CMSIS-NN anchors), the host, evaluation."""
    from deploy_anchors import anchors

    from quarl.deploy.edge.targets import TARGETS

    counted = anchors(list(TARGETS.values()), widths, args.cmsis_nn)
    macs = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    exported = export_rows(args.goal_record.split(), macs)
    if isinstance(exported, str):
        print(f"- no rows of the {RECORD}: {exported}")
        exported = []
    cells = sorted({r["cell"] for r in exported})
    goal_rows = target_rows(exported, counted, RECORD, f"record {cells[0] if cells else '(none)'}")
    goal_rows += target_rows(rows, counted, GOAL_NETWORK, "bench's fp32 -> int8")
    goal_rows.append(host_row(table, GOAL_NETWORK))
    goal_rows += evaluation_rows(model, args.episodes, args.eval_repeats, pong)
    return pd.DataFrame(goal_rows)


def print_goals(goals: pd.DataFrame, widths: Sequence[int], record: str) -> None:
    """The goals table under a heading that says what each row measured."""
    macs = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    print(
        f"\n## Goals (issue 58): PPO CartPole 64x64, {'-'.join(map(str, widths))} ({macs:,} MACs)\n\n"
        f"`record <cell>`: the C policy `quarl export {record} --format c` writes (the default run's 8-bit PTQ "
        "record; its measures.json), int8 and `--precision int4 --weight-coding huffman`; `bench's fp32 -> int8`: "
        f"{GOAL_NETWORK}'s fp32 policy from quarl's cache, full int8 as bench_deploy's `c` rows. Instructions "
        "counted under QEMU (deterministic; an instruction is not a cycle), per MAC over every layer's weights; "
        "anchors: CMSIS-NN's arm_fully_connected_s8 through the same layer shapes on the same harness "
        "(benchmarks/deploy_anchors.py), the fewer of the target's -O level and -O2. Host and evaluation ratios "
        "timed side by side, one thread.\n"
    )
    print(goals.to_markdown(index=False))


def run_goals(
    bench: ModuleType,
    table: pd.DataFrame,
    rows: Sequence[dict[str, Any]],
    models: dict[str, Any],
    args: argparse.Namespace,
) -> None:
    """A full run's goals table, from its latency and target tables (bench: bench_deploy)."""
    model = models.get(GOAL_NETWORK)
    net = bench.acting_network(model) if model is not None else None
    widths = layer_widths(net) if net is not None else [4, 64, 64, 2]
    print_goals(goals_table(rows, table, model, widths, args, pong=True), widths, args.goal_record)


def quick(bench: ModuleType, args: argparse.Namespace) -> None:
    """The goals table alone: the tuned CartPole policy (from quarl's cache, trained first where
    missing), its int8 and int4 Huffman C policies on every target, the host ratio, evaluation."""
    from quarl.deploy import compile_network
    from quarl.deploy.edge import integer_policy
    from quarl.rl.envs import random_observations

    name = GOAL_NETWORK
    if args.no_reward:
        model, transform = bench.untrained(name, args.policies), None
    else:
        model = bench.trained_models([name], args.policies, 1)[name]
        transform = bench.obs_transform_of(name, args.policies)
    net = bench.acting_network(model, transform)
    example = random_observations(bench.network_config(name, args.policies).env, 512, seed=1)
    calibration = example if args.no_reward else bench.calibration_states(model, name, args.policies, transform)
    runners = {"c": compile_network(net, "c", calibration), "onnx_int8": compile_network(net, "onnx_int8", example)}
    huffman = dataclasses.replace(integer_policy(net, calibration, weight_bits=4), weight_coding="huffman")
    rows = bench.firmware_rows(name, {INT8: runners["c"].integer, HUFFMAN: huffman}, calibration)
    times = bench.latency(runners, example, args.rounds, args.budget)
    native = [runners["c"].c.native_ns(calibration[:256], repeats=200) / 1e6 for _ in range(max(args.rounds, 3))]
    measured = [
        ("c", "fp32 -> full int8", times["c"]["median_ms"]),
        ("c (native)", "fp32 -> full int8", statistics.median(native)),
        ("onnx_int8", "fp32", times["onnx_int8"]["median_ms"]),
    ]
    table = pd.DataFrame([{"network": name, "backend": b, "policy": p, "median ms": ms} for b, p, ms in measured])
    widths = layer_widths(net)
    print_goals(goals_table(rows, table, model, widths, args, pong=args.pong), widths, args.goal_record)
