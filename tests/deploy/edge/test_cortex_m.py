"""The Cortex-M targets without DSP extension or FPU (the M0 on QEMU's micro:bit, the M3 on the MPS2
AN385): the C policy compiles its portable kernel (no SMLAD, SXTB16 or SMMULR), bit for bit the
reference on odd layer sizes (rows and columns past the last multiple of 4), its float steps call
libgcc's soft-float helpers, and the M4 shares their start-up code and linker script
(`targets/_cortex_m.py`)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from quarl.deploy import acting_network
from quarl.deploy.edge import integer_policy
from quarl.deploy.edge.targets import TARGETS, cortex_m0, cortex_m4
from quarl.deploy.edge.toolchain import tool
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.deploy.edge.test_cgen import PTQ8


def odd_policy():
    """An untrained PPO Pendulum policy (3 observations, hidden widths 21 and 35), 8-bit, and states."""
    torch.manual_seed(0)
    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [21, 35]}, n_steps=64, seed=0, device="cpu")
    quantize_policy(model, PTQ8)
    states = random_observations("Pendulum-v1", 500, seed=2)
    return integer_policy(acting_network(model), states[:300]), states[300:]


@pytest.mark.parametrize("name", ["cortex-m0", "cortex-m3"])
def test_the_portable_kernel_is_exact_on_odd_sizes_with_soft_float(name, tmp_path):
    t = TARGETS[name]
    if t.missing():
        pytest.skip(t.missing())
    assert "-mfloat-abi=soft" in t.cflags and f"-mcpu={name}" in t.cflags
    policy, states = odd_policy()
    got = t.actions(policy, states[:200], tmp_path)
    assert np.array_equal(np.asarray(got).view(np.uint32), policy.act(states[:200]).view(np.uint32))
    objdump, nm = (tool(t.cc).replace("-gcc", suffix) for suffix in ("-objdump", "-nm"))
    code = subprocess.run([objdump, "-d", "policy.o"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "policy_act" in code and not {"smlad", "sxtb16", "smmulr"} & set(code.split())
    undefined = subprocess.run([nm, "-u", "policy.o"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "__aeabi_f" in undefined  # soft-float: the observation's float steps call libgcc


def test_the_cortex_m_targets_share_start_up_and_linker_script():
    m0, m3, m4 = (TARGETS[n] for n in ("cortex-m0", "cortex-m3", "cortex-m4"))
    assert m3.files == m4.files and m4.files["startup.c"] == cortex_m4.STARTUP
    body = cortex_m4.STARTUP.split("\n", 1)[1]
    assert m0.files["startup.c"].split("\n", 1)[1] == body and set(m0.files) == {"startup.c", "nrf51.ld"}
    script = cortex_m0.LINKER_SCRIPT
    assert "ORIGIN = 0x00000000, LENGTH = 256K" in script and "ORIGIN = 0x20000000, LENGTH = 16K" in script
    assert ("-M", "microbit") == m0.emulator_args[:2] and ("-M", "mps2-an385") == m3.emulator_args[:2]
