"""The C policy's host AVX2 path (`quarl.deploy.edge.cavx2`): the AVX2 build bit for bit against the integer
reference and the portable build on odd layer sizes (widths not multiples of 16 or 8, a layer wider than
the int16 activations' block of columns), int8 and int16 activations; skipped where the host compiler or
CPU has no AVX2. And the batch-1 call (`quarl.deploy.edge.cfast`, or ctypes) on every input form."""

from __future__ import annotations

import subprocess
from typing import Optional

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from quarl.deploy import acting_network
from quarl.deploy.edge import cavx2, cfast, integer_policy
from quarl.deploy.edge.cgen import header, source
from quarl.deploy.edge.toolchain import CPolicy, available, tool
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.deploy.edge.test_cgen import PTQ8

torch.set_num_threads(1)


def _avx2_missing() -> Optional[str]:
    missing = available("cc")
    if missing is None and not cavx2.host_vector(tool("cc")):
        missing = "no AVX2 here: the host cc's -march=native macros have no __AVX2__ (the portable path runs)"
    return missing


def _policy(arch: list[int], activation_bits: int):
    """An untrained PPO policy on Pendulum (3 observations, 1 action), PTQ 8-bit, and states: random
    ones and far out of range ones (codes at both ends)."""
    torch.manual_seed(0)
    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": arch}, n_steps=64, seed=0, device="cpu")
    quantize_policy(model, PTQ8)
    states = random_observations("Pendulum-v1", 600, seed=2)
    policy = integer_policy(acting_network(model), states[:300], activation_bits=activation_bits)
    extreme = np.random.default_rng(3).choice([-1e3, 1e3, 0.0], size=(200, 3)).astype(np.float32)
    return policy, np.concatenate([states, extreme]).astype(np.float32)


@pytest.mark.parametrize("activation_bits", [8, 16])
@pytest.mark.parametrize("arch", [[21, 35], [300, 19]], ids=["21-35", "300-19"])
def test_the_avx2_build_is_exact_on_odd_layer_sizes(activation_bits, arch, tmp_path):
    missing = _avx2_missing()
    if missing:
        pytest.skip(missing)
    policy, states = _policy(arch, activation_bits)
    avx2 = CPolicy(policy, tmp_path / "avx2", vector=True)
    portable = CPolicy(policy, tmp_path / "portable", vector=False)
    assert avx2.vector and not portable.vector
    dump = subprocess.run(["objdump", "-d", "libpolicy.so"], cwd=avx2.folder, capture_output=True, text=True).stdout
    assert "vpmaddwd" in dump and ("vpmuldq" in dump or activation_bits == 16)  # the dots; the int8 requantization
    expected = policy.act(states)
    for c in (avx2, portable):
        assert np.array_equal(c.act(states).view(np.uint32), expected.view(np.uint32))


def test_the_avx2_source_compiles_warning_free_and_pedantic(cartpole, tmp_path):
    missing = _avx2_missing()
    if missing:
        pytest.skip(missing)
    policy = cartpole.integer()
    (tmp_path / "policy.h").write_text(header(policy))
    (tmp_path / "policy.c").write_text(source(policy))
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", *cavx2.FLAGS]
    done = subprocess.run([tool("cc"), *flags, "-c", "policy.c"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
def test_the_batch_1_call_gives_the_references_action_for_every_input_form(which, request, tmp_path):
    """`act_one` through the CPython function (`cfast`, where CPython's headers are installed) and through
    ctypes: float32 or float64, one observation or a batch of one, a discrete index as int64."""
    if available("cc"):
        pytest.skip(available("cc"))
    trained = request.getfixturevalue(which)
    policy = trained.integer()
    c = CPolicy(policy, tmp_path)
    assert c.call == ("cpython" if cfast.include() else "ctypes")
    paths = [c._fast, c._through_ctypes]
    for state in trained.states[:50]:
        expected = policy.act(state[None])
        for obs in (state.astype(np.float32), state.astype(np.float64)[None], np.asfortranarray(state[None])):
            got = c.act_one(obs)
            assert got.dtype == expected.dtype and got.shape == expected.shape and np.array_equal(got, expected)
        for path in paths:  # each path on the buffer it reads
            c._one_in[...] = state
            assert np.array_equal(path(c._one_in), expected)
