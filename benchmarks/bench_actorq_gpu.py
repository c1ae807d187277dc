"""ActorQ as published, and the paper's mixed-precision study, in one script that fits a GPU device
machine's ten minutes (`benchmarks/device/gpu.sh` runs it there).

Parts, in order of what the study needs most, each skipped with a line saying so when the time left
(`--budget-s`) cannot hold it:

1. **CUDA smoke** (about 30 s at most): DQN learners with the 3x2048 Q-network on the device, one
   capturing its update as a CUDA graph (`actorq.cuda_graph`), one eager, 50 updates each from the
   same weights on the same random batches (their weights must agree to 1e-6 of their largest, else
   the runs update eagerly; they agreed bit for bit on an H200), a publish (one copy from the GPU), an int8 actor built from it (ONNX Runtime) and a
   bf16 autocast update; then each learner alone (updates/s, publish ms), update time against batch
   size (32..1024, eager and graph) and a torch.profiler trace of 200 graph updates with the GPU's
   idle share (`learner_trace.json`). Any error or a non-finite value exits 1 before anything else
   runs.
2. **ActorQ DQN on CartPole, Acrobot, then MountainCar** (`+sweep=actorq_gpu`; 5, 3 and 3 seeds,
   each seed with fp32 then int8 actors): the learner on the device, 14 actors pinned one to a core
   (all cores but two), each run to its published target (198.22, -107.45, -120.62;
   `actorq.stop_at_return`) or its cap (`--cap-s`; `actorq.time_limit_s`). Each env stops at its
   share of the budget (`SHARE_S`, the envs left out lending theirs), so that the next env gets its
   turn; a seed cut short there is not stored.
3. **Samples-per-insert ablation**: CartPole, seed 0, at 8 and 128 sampled items per inserted one
   (the tuned rate is 32), fp32 and int8 actors: which regime, actor- or learner-bound, each rate
   puts a run in.
4. **Mixed precision** (`benchmarks/bench_amp.py`, at most `AMP_S`): DQN on Pong at the paper's
   three sizes; its CSV grows a row per size, so a part cut short keeps the sizes it measured.
5. **D4PG** with the 2048x3 policy on Pendulum (`+sweep=d4pg_gpu`; Gymnasium's Pendulum travels,
   DeepMind Control does not), fp32 vs int8 actors.
6. **4-bit on a VNNI CPU** (`benchmarks/bench_int4.py`), only where `lscpu` lists avx512_vnni or amx,
   with the time left (it trains its 3x2048 policy first).

The ActorQ table prints time to target (a bound, ≥, where the cap came first), the speedup beside
the published one, and each side's throughput and waits.

Writes under `--out`: the store `results.sqlite`, the records as `records.tar.gz` (one JSON file a
cell, for `docs/reproduction/records`), `actorq_gpu.md` and `amp.csv`, and `log.txt`.

`--rehearse`: the same parts on this machine's CPU with tiny budgets (`train.device=cpu`, 64x64
networks, 2 actors, 5 s caps, learning from the first batch (`actorq.min_replay=0`), CartPole with
one seed, one ablation rate, the smoke's timings over a few updates (REHEARSE_REPEATS), tiny AMP
networks on a small buffer): the test suite runs it. The caps count from the learner's start, so
they hold the actors' start-up (a spawned process importing torch: 2 s alone, 8 s on a loaded
machine) and still leave seconds of training after it.

Usage: python benchmarks/bench_actorq_gpu.py [--out outputs/gpu] [--budget-s 540] [--cap-s 45] [--rehearse]
"""

from __future__ import annotations

import argparse
import functools
import math
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"cartpole": 198.22, "acrobot": -107.45, "mountaincar": -120.62}  # the paper's DQN rows, in run order
START_S = 25  # a capped run's start-up (14 actor processes) and its evaluation, beyond its cap
SMOKE_S = 30
SEEDS = {"cartpole": 5, "acrobot": 3, "mountaincar": 3}
FULL_S = 540  # the budget SHARE_S is made for (a shorter one scales the shares down)
SHARE_S = {"cartpole": 200, "acrobot": 120, "mountaincar": 130}  # each env's seconds at most (its seeds x 2)
ABLATION_SPI = (8, 128)  # CartPole's tuned rate is 32 (batch 64 x 128 gradient steps / 256 env steps)
ABLATION_CAP_S = 20
BATCHES = (32, 64, 128, 256, 512, 1024)  # the update-time-against-batch-size sweep
GRAPH_GAP = 1e-6  # the graph's and the eager learner's weights after 50 updates: 0.0 on an H200
AMP_S = 120  # the mixed-precision part's cap on a device (about 60 s measured in the plan: 3 sizes)
REPEATS = {"alone": 500, "batch": 100, "trace": 200}  # the smoke's timed updates: alone, per batch size, traced
REHEARSE_REPEATS = {"alone": 20, "batch": 5, "trace": 20}  # --rehearse: enough to run each timing once
REHEARSE_CAP_S = 5.0  # --rehearse: each ActorQ run's cap, actor start-up included (2 actors start in about 1 s)


class Clock:
    """The script's time budget."""

    def __init__(self, budget_s: float) -> None:
        self.end = time.monotonic() + budget_s

    def left(self) -> float:
        return self.end - time.monotonic()

    def allows(self, part: str, needs_s: float) -> bool:
        if self.left() >= needs_s:
            return True
        print(f"\n## {part}: skipped, {self.left():.0f} s left of the budget and it needs about {needs_s:.0f} s\n")
        return False


def smoke(device: str, trace: Path, *overrides: str) -> bool:
    """The learner's whole GPU path once: updates, a publish, an int8 actor, an autocast update, and
    the CUDA-graph learner against the eager one from the same weights on the same batches; raises on
    any fault. Whether the graph's updates matched (the runs fall back to eager updates if not)."""
    import dataclasses

    import numpy as np
    import torch
    from hydra import compose, initialize_config_dir

    from quarl import CONF_DIR
    from quarl.actorq import execution
    from quarl.actorq.dqn import DQNLearner
    from quarl.actorq.params import ParameterQuantizer, unpack
    from quarl.actorq.settings import resolve
    from quarl.config import schema
    from quarl.train.amp import DTYPE

    start = time.monotonic()
    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "algo=dqn",
                "env=cartpole",
                "quant=actorq",
                "+sweep=actorq_gpu",
                f"train.device={device}",
                *overrides,
            ],
        )
    settings = resolve(cfg)
    eager = DQNLearner(dataclasses.replace(settings, cuda_graph=False), torch.device(device))
    rng = np.random.default_rng(0)
    batches = [random_batch(rng) for _ in range(50)]
    start_weights = [{k: v.clone() for k, v in net.state_dict().items()} for net in (eager.policy, eager.target)]
    losses = [eager.update(b)["loss"] for b in batches]
    try:
        graphed, gap = graph_against_eager(settings, device, start_weights, batches, eager)
        verdict = f"{gap:.1e} of their largest ({'matched' if gap < GRAPH_GAP else 'NOT matched: the runs update eagerly'})"
    except Exception as exc:  # the runs can still update eagerly
        graphed, gap, verdict = (
            None,
            np.inf,
            f"n/a: the graph failed ({type(exc).__name__}: {exc}); the runs update eagerly",
        )
    spec = settings.actor
    packed = ParameterQuantizer(spec.layer_shapes, 8).pack(eager.policy)
    int8_actor = execution.build(execution.convert(unpack(packed, spec.layer_shapes, 8), 8), 8, spec.squash)
    actions = int8_actor(batches[0]["obs"])
    with torch.autocast(torch.device(device).type, dtype=DTYPE):
        losses.append(eager.update(batches[0])["loss"])
    values = torch.stack(losses).float().cpu()
    if not torch.isfinite(values).all() or packed.nbytes == 0 or not np.isfinite(actions).all():
        raise RuntimeError(f"smoke run: non-finite losses {values.tolist()[-3:]}, an empty publish or int8 actions")
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(
        f"## CUDA smoke: passed on {name} in {time.monotonic() - start:.1f} s "
        f"(51 eager updates, loss {values[0]:.3f} -> {values[49]:.3f}, {packed.nbytes} bytes a publish); "
        f"after 50 updates from the same weights on the same batches, the CUDA-graph learner's weights "
        f"and the eager one's differ by {verdict}\n"
    )
    for learner in (eager, graphed):
        if learner is not None:
            how = "CUDA graph" if learner.graphed else "eager"
            print(learner_alone(learner, batches[0], spec.layer_shapes, device, how) + "\n")
    matched = gap < GRAPH_GAP
    print(batch_scaling(settings, device, device == "cuda" and graphed is not None and matched) + "\n")
    if graphed is not None:
        print(idle_share(graphed, batches, device, trace) + "\n")
    return matched


def batch_scaling(settings: Any, device: str, graph: bool) -> str:
    """Update time against batch size (BATCHES), eager and, where it matched, as a CUDA graph: where
    the 3x2048 update stops being bound by the host."""
    import dataclasses

    import numpy as np
    import torch

    from quarl.actorq.dqn import DQNLearner

    rng, rows = np.random.default_rng(1), []
    for batch in BATCHES:
        data = random_batch(rng, batch)
        row = {"batch": batch}
        for how, graphed in (("eager", False), ("CUDA graph", True)):
            if graphed and not graph:
                continue
            learner = DQNLearner(dataclasses.replace(settings, cuda_graph=graphed), torch.device(device))
            update = functools.partial(learner.update, data)
            row[f"{how} ms/update"] = round(timed(update, REPEATS["batch"], device) * 1e3, 3)
        rows.append(row)
    return f"## Update time against batch size on {device}\n\n" + pd.DataFrame(rows).to_markdown(index=False)


def idle_share(learner: Any, batches: list[dict[str, Any]], device: str, trace: Path) -> str:
    """A torch.profiler trace of REPEATS["trace"] updates of `learner` (written to `trace`) and the GPU's idle
    share over them: 1 - the device time of its kernels / the wall time (n/a on the CPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    learner.update(batches[0])  # warm
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for i in range(REPEATS["trace"]):
            learner.update(batches[i % len(batches)])
        sync()
        wall = time.perf_counter() - t0
    prof.export_chrome_trace(str(trace))
    if device != "cuda":
        return f"## Profiler trace of {REPEATS['trace']} updates: {trace} (GPU idle share: n/a on the CPU)"
    busy = sum(e.self_device_time_total for e in prof.key_averages()) / 1e6
    return (
        f"## Profiler trace of {REPEATS['trace']} CUDA-graph updates: {trace}; the GPU's kernels ran {busy:.3f} s of "
        f"{wall:.3f} s of wall time: idle {1 - busy / wall:.0%} of it"
    )


def graph_against_eager(
    settings: Any, device: str, start: list[dict[str, Any]], batches: list[dict[str, Any]], eager: Any
) -> tuple[Any, float]:
    """A learner updating as a CUDA graph (`actorq.cuda_graph`, eager without CUDA) from the `start`
    weights on `batches`, and its weights' largest gap to `eager`'s, relative to their largest value."""
    import torch

    from quarl.actorq.dqn import DQNLearner

    graphed = DQNLearner(settings, torch.device(device))
    graphed.policy.load_state_dict(start[0])
    graphed.target.load_state_dict(start[1])
    for b in batches:
        graphed.update(b)
    gap = max(
        float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))
        for a, b in zip(graphed.policy.state_dict().values(), eager.policy.state_dict().values())
    )
    return graphed, gap


def random_batch(rng: Any, n: int = 64) -> dict[str, Any]:
    """A CartPole-shaped batch of `n` random transitions."""
    import numpy as np

    return {
        "obs": rng.standard_normal((n, 4), dtype=np.float32),
        "next_obs": rng.standard_normal((n, 4), dtype=np.float32),
        "action": rng.integers(0, 2, n).astype(np.int64),
        "reward": np.ones(n, np.float32),
        "discount": np.full(n, 0.97, np.float32),
    }


def timed(work: Callable[[], Any], times: int, device: str) -> float:
    """Seconds per call of `work`, `times` calls after one, timed to the device's end."""
    import torch

    work()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(times):
        work()
    sync()
    return (time.perf_counter() - t0) / times


def learner_alone(learner: Any, batch: dict[str, Any], shapes: list[tuple[int, int]], device: str, how: str) -> str:
    """The learner's own speed, without actors beside it: updates/s and the time of a publish at
    32 and 8 bits (each timed to the GPU's end), the ceiling an ActorQ run's learner works under."""
    import torch

    from quarl.actorq.networks import to_device
    from quarl.actorq.params import ParameterQuantizer

    update_s = timed(lambda: learner.update(batch), REPEATS["alone"], device)
    batch_s = timed(lambda: to_device(batch, torch.device(device)), 200, device)
    quantizers = {bits: ParameterQuantizer(shapes, bits) for bits in (32, 8)}
    publish = {bits: timed(lambda q=q: q.pack(learner.policy), 20, device) for bits, q in quantizers.items()}
    return (
        f"## The learner alone on {device}, {how}: {1 / update_s:.0f} updates/s ({update_s * 1e3:.2f} ms an "
        f"update of batch 64, timed over {REPEATS['alone']} on the same batch; moving a batch to the device as "
        f"eager updates "
        f"do takes {batch_s * 1e3:.2f} ms); a publish takes {publish[32] * 1e3:.1f} ms at 32 bits and {publish[8] * 1e3:.1f} ms at 8 bits"
    )


def quarl_run(args: list[str], log: Path, limit_s: float) -> str:
    """`python run.py ARGS`, its output appended to `log`, stopped (SIGTERM: the cell in progress ends
    cleanly, the stored ones stay) after `limit_s`; how it ended."""
    with log.open("a") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            return f"exit code {process.wait(timeout=max(1.0, limit_s))}"
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
            return f"stopped after its {limit_s:.0f} s share"


def share_s(env: str, envs: list[str], budget_s: float) -> float:
    """`env`'s seconds at most: the envs run share SHARE_S's total in SHARE_S's proportions, scaled
    down with a budget under FULL_S (`--envs acrobot mountaincar` gives those two CartPole's share too)."""
    return sum(SHARE_S.values()) * SHARE_S[env] / sum(SHARE_S[e] for e in envs) * min(1.0, budget_s / FULL_S)


def actorq_rows(a: argparse.Namespace, clock: Clock, common: list[str], log: Path, envs: list[str]) -> None:
    """The DQN rows of `envs`, one multirun per env (its seeds, each with fp32 then int8 actors),
    each stopped at its share of the budget (SHARE_S) so that the next env gets its turn."""
    for env in envs:
        if not clock.allows(f"ActorQ DQN on {env}", a.cap_s + START_S):
            continue
        seeds = ",".join(str(s) for s in range(1 if a.rehearse else SEEDS[env]))
        how = quarl_run(
            [
                "-m",
                "+sweep=actorq_gpu",
                f"env={env}",
                f"seed={seeds}",
                f"actorq.stop_at_return={TARGETS[env]}",
                f"actorq.time_limit_s={a.cap_s}",
                f"hydra.sweep.dir={a.out}/runs/{env}",
                *common,
            ],
            log,
            min(clock.left(), share_s(env, envs, a.budget_s)),
        )
        print(f"ActorQ DQN on {env}, seeds {seeds}: {how} ({clock.left():.0f} s left)")


def ablation(a: argparse.Namespace, clock: Clock, common: list[str], log: Path) -> None:
    """CartPole at other samples-per-insert rates (seed 0, fp32 and int8 actors): fewer updates per env
    step free the actors (actor-bound), more hold them back (learner-bound)."""
    if not clock.allows("Samples-per-insert ablation", ABLATION_CAP_S + START_S):
        return
    spis = ABLATION_SPI[:1] if a.rehearse else ABLATION_SPI
    how = quarl_run(
        [
            "-m",
            "+sweep=actorq_gpu",
            "env=cartpole",
            "seed=0",
            f"actorq.samples_per_insert={','.join(str(v) for v in spis)}",
            f"actorq.stop_at_return={TARGETS['cartpole']}",
            f"actorq.time_limit_s={min(a.cap_s, ABLATION_CAP_S)}",
            f"hydra.sweep.dir={a.out}/runs/ablation",
            *common,
        ],
        log,
        clock.left(),
    )
    print(f"Samples-per-insert ablation on CartPole ({spis}): {how} ({clock.left():.0f} s left)")


def d4pg_rows(a: argparse.Namespace, clock: Clock, common: list[str], log: Path) -> None:
    """D4PG with the published 2048x3 policy on Pendulum, fp32 vs int8 actors, with the time left."""
    if not clock.allows("D4PG on Pendulum", 2 * (a.cap_s + START_S)):
        return
    tiny = (
        [
            "algo.hyperparams.policy_layers=[64,64]",
            "algo.hyperparams.critic_layers=[64,64]",
            "actorq.actors=2",
            "actorq.min_replay=0",
            "train.device=cpu",
        ]
        if a.rehearse
        else []
    )
    how = quarl_run(
        [
            "-m",
            "algo=d4pg",
            "+sweep=d4pg_gpu",
            f"actorq.time_limit_s={a.cap_s}",
            f"hydra.sweep.dir={a.out}/runs/d4pg",
            *common,
            *tiny,
        ],
        log,
        clock.left(),
    )
    print(f"D4PG on Pendulum: {how} ({clock.left():.0f} s left)")


def summary(out: Path) -> pd.DataFrame:
    """Time to target per (algo, env, precision) with the speedup beside the paper's, and each side's
    throughput and waits from the records."""
    from quarl.collate import actorq_timing, load
    from quarl.collate.actorq_timing import time_to_reward
    from quarl.store.sqlite import Store

    store = out / "results.sqlite"
    if not store.exists():
        return pd.DataFrame()
    study = load(store)
    ttr = time_to_reward(study, Store(store).curves())
    if ttr.empty:
        return ttr
    runs = actorq_timing.runs(study)  # with precision, network and training: a store's several trainings stay apart
    keys = [*actorq_timing.SETTING, "precision"]
    sides = runs.groupby(keys)[
        ["actor_steps_per_s", "learner_updates_per_s", "learner_wait_s", "actor_send_s", "train_time_s"]
    ].mean()
    devices = runs.groupby(keys)["training_device"].first()
    regimes = runs.groupby(keys).apply(actorq_timing.regime)
    rows = []
    for r in ttr.to_dict("records"):
        at = tuple(r[k] for k in keys)
        side, paper = sides.loc[at], r.get("speedup (paper)")
        bound = {">=": "≥ ", "<=": "≤ "}.get(r["speedup_bound"], "")
        rows.append(
            {
                "algo": r["algo"],
                "env": r["env"],
                "network": r["network"],
                "training": r["training"],
                "actors": r["precision"],
                "learner": devices.loc[at],
                "target": r["target"],
                "time to target (s)": f"{'≥ ' if r['censored'] else ''}{r['time_s']:.1f}",
                "speedup": "–" if math.isnan(r["speedup_vs_fp32"]) else f"{bound}{r['speedup_vs_fp32']:.2f}x",
                "speedup (paper)": "" if pd.isna(paper) else f"{paper:.2f}x",
                "actor steps/s": round(side["actor_steps_per_s"]),
                "learner updates/s": round(side["learner_updates_per_s"]),
                "learner waiting (s)": round(side["learner_wait_s"], 1),
                "actors blocked sending (s, summed)": round(side["actor_send_s"], 1),
                "run (s)": round(side["train_time_s"], 1),
                "regime": regimes.loc[at],
            }
        )
    return pd.DataFrame(rows)


def int4_on_vnni(rehearse: bool, clock: Clock) -> None:
    """bench_int4 where the CPU has VNNI or AMX, stopped when the budget ends (it trains its policy first)."""
    flags = "" if rehearse else subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    if "avx512_vnni" not in flags and "amx" not in flags:
        print("\n## 4-bit on a VNNI CPU: skipped, this CPU lists neither avx512_vnni nor amx\n")
    elif clock.allows("4-bit on a VNNI CPU", 90):
        try:
            subprocess.run(
                [sys.executable, str(ROOT / "benchmarks/bench_int4.py"), "--rounds", "5"],
                timeout=clock.left(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            print("\n## 4-bit on a VNNI CPU: stopped at the end of the budget\n")


def mixed_precision(a: argparse.Namespace, clock: Clock, device: str) -> None:
    """bench_amp on the device, stopped at AMP_S or the end of the budget (its CSV keeps the sizes done)."""
    tiny = ["--tiny", "--updates", "3", "--rounds", "1", "--train-steps", "32"] if a.rehearse else []
    if not clock.allows("Mixed precision", 20 if a.rehearse else 60):
        return
    command = [
        sys.executable,
        str(ROOT / "benchmarks/bench_amp.py"),
        "--device",
        device,
        "--csv",
        str(a.out / "amp.csv"),
    ]
    try:
        subprocess.run([*command, *tiny], timeout=min(AMP_S, clock.left()), check=False)
    except subprocess.TimeoutExpired:
        print(f"\n## Mixed precision: stopped after {min(AMP_S, clock.left()):.0f} s; amp.csv has the sizes done\n")


def write_summary(out: Path, device: str) -> None:
    """Print the ActorQ table and write it to `out`/actorq_gpu.md."""
    table = summary(out)
    text = table.to_markdown(index=False) if len(table) else "no ActorQ record landed: see log.txt"
    (out / "actorq_gpu.md").write_text(text + "\n")
    print(f"\n## ActorQ, learner on {device}\n\n{text}\n")


def archive(out: Path) -> int:
    """The runs' records as one tar of `<cell_key>.<start>.record.json` files
    (`quarl.report.build.record_name`); how many."""
    from quarl.report.build import archive as copy_records

    with tempfile.TemporaryDirectory() as tmp:
        count = copy_records(out / "runs", Path(tmp))
        with tarfile.open(out / "records.tar.gz", "w:gz") as tar:
            for path in sorted(Path(tmp).glob("*.record.json")):
                tar.add(path, arcname=path.name)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "outputs/gpu")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget of the whole script")
    ap.add_argument("--cap-s", type=float, help="wall-clock cap of each ActorQ run (default 45 s; 5 s rehearsing)")
    ap.add_argument("--envs", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    ap.add_argument("--smoke-only", action="store_true", help="the CUDA smoke part alone (learner figures, trace)")
    ap.add_argument("--rehearse", action="store_true", help="on the CPU with tiny budgets (the test suite's run)")
    a = ap.parse_args()
    if a.rehearse:
        a.envs = ["cartpole"]
        REPEATS.update(REHEARSE_REPEATS)
    a.cap_s = a.cap_s or (REHEARSE_CAP_S if a.rehearse else 45.0)
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    log, clock = a.out / "log.txt", Clock(a.budget_s)
    import torch

    device = "cpu" if a.rehearse else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("No CUDA device is visible: run with --rehearse on a CPU machine.", file=sys.stderr)
        return 1
    tiny = ["algo.hyperparams.policy_kwargs.net_arch=[64,64]"] if a.rehearse else []
    try:
        graph_matched = smoke(device, a.out / "learner_trace.json", *tiny)
    except Exception as exc:  # any fault at all ends the script before it spends the budget
        print(f"CUDA smoke run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if a.smoke_only:
        return 0
    common = [
        f"store.path={a.out}/results.sqlite",
        f"store.policies={a.out}/policies",
        "train.progress=false",
        "eval.progress=false",
        "hydra.callbacks.collate.enabled=false",
        *([] if graph_matched else ["actorq.cuda_graph=false"]),
    ]
    # rehearsing, learning starts at one batch (not rl-zoo3's 1000 transitions), so that every capped
    # run updates within a second of its first experience
    dqn = [*common, *tiny, *(["train.device=cpu", "actorq.actors=2", "actorq.min_replay=0"] if a.rehearse else [])]
    actorq_rows(a, clock, dqn, log, a.envs)
    write_summary(a.out, device)
    ablation(a, clock, dqn, log)
    write_summary(a.out, device)
    mixed_precision(a, clock, device)
    d4pg_rows(a, clock, common, log)
    write_summary(a.out, device)
    int4_on_vnni(a.rehearse, clock)
    print(f"\nRecords: {archive(a.out)} in {a.out / 'records.tar.gz'}; log: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
