"""ONNX export of quarl's policies: `torch.onnx.export` as documented against `quarl.deploy.onnx_io.to_onnx`,
measured side by side in one run.

`torch.onnx.export(dynamo=True)` builds its table of ATen-to-ONNX functions (`ONNXRegistry.from_torchlib`)
on every call; `to_onnx` builds it once a process and calls the exporter beneath with it. For each
policy (untrained SB3 policies of the QuaRL sizes: DQN and PPO on CartPole-v1, SAC on Pendulum-v1,
DQN's Nature CNN on Pong), the table gives the median CPU seconds of an export each way (after one
warm-up export of each, so the registry is built before timing) and whether the two wrote the same
bytes. The export runs in the deploy backends (every `onnx*` runner; `backend=auto` exports a
network once for all its candidates) and in `quarl export`'s ONNX files.

Usage: python benchmarks/bench_onnx_export.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from typing import Callable

import numpy as np
import pandas as pd
import torch

from quarl.deploy import onnx_io
from quarl.deploy.acting import ActingNetwork, acting_network


def documented_export(net: ActingNetwork, example: np.ndarray) -> bytes:
    """What `to_onnx` replaces: the public `torch.onnx.export` call, with `to_onnx`'s post-processing."""
    x = torch.from_numpy(np.repeat(example[:1], 2, axis=0))
    with onnx_io._quiet(), torch.no_grad():
        program = torch.onnx.export(
            net.eval(),
            (x,),
            None,
            input_names=[onnx_io.INPUT],
            output_names=[onnx_io.OUTPUT],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            verbose=False,
            optimize=True,
        )
    assert program is not None
    proto = program.model_proto
    onnx_io._strip_annotations(proto)
    return proto.SerializeToString()


def cpu_s(export: Callable[[ActingNetwork, np.ndarray], bytes], net: ActingNetwork, example: np.ndarray) -> float:
    start = time.process_time()
    export(net, example)
    return time.process_time() - start


def policies() -> dict[str, ActingNetwork]:
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import DQN, PPO, SAC
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    pong = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1), 4)
    models = {
        "DQN CartPole-v1 (64x64)": DQN("MlpPolicy", "CartPole-v1"),
        "PPO CartPole-v1 (64x64)": PPO("MlpPolicy", "CartPole-v1"),
        "SAC Pendulum-v1 (256x256)": SAC("MlpPolicy", "Pendulum-v1"),
        "DQN Pong (Nature CNN)": DQN("CnnPolicy", pong, buffer_size=100),
    }
    return {name: acting_network(model) for name, model in models.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed exports of each policy each way")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    rows = []
    for name, net in policies().items():
        example = np.zeros((1, *net.obs_shape), dtype=net.obs_dtype)
        same = documented_export(net, example) == onnx_io.to_onnx(net, example)  # also the warm-up
        old, new = [], []
        for _ in range(a.repeats):  # interleaved: both see the same machine
            old.append(cpu_s(documented_export, net, example))
            new.append(cpu_s(onnx_io.to_onnx, net, example))
        rows.append(
            {
                "policy": name,
                "torch.onnx.export CPU s": statistics.median(old),
                "to_onnx CPU s": statistics.median(new),
                "ratio": statistics.median(new) / statistics.median(old),
                "same bytes": same,
            }
        )
    print(f"## ONNX export, median of {a.repeats} each (CPU seconds, one thread)")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3f"))


if __name__ == "__main__":
    main()
