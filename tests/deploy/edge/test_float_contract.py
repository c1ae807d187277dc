"""The C policy's contract for NaN and infinite observations (docs/edge.md): NaN enters as the lowest
input code, +inf as the highest and -inf as the lowest (with VecNormalize: as +clip and -clip), as the
reference does, and the C policy acts as the reference on them; fast math, under which that cannot
hold, is refused when the generated source is compiled."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from quarl.deploy.edge.cgen import header, source
from quarl.deploy.edge.integer import IntegerPolicy
from quarl.deploy.edge.targets import TARGETS
from quarl.deploy.edge.toolchain import CPolicy

REFUSAL = (
    "NaN and infinite inputs need IEEE floats (docs/edge.md): build without -ffast-math, -Ofast, -ffinite-math-only"
)
FAST_MATH = [["-Ofast"], ["-O2", "-ffast-math"], ["-O3", "-ffinite-math-only"]]


def _compile(command: list[str], policy: IntegerPolicy, folder: Path) -> subprocess.CompletedProcess:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "policy.h").write_text(header(policy))
    (folder / "policy.c").write_text(source(policy))
    return subprocess.run([*command, "-c", "policy.c", "-o", "policy.o"], cwd=folder, capture_output=True, text=True)


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the fast-math refusal is checked with the host gcc (Debian's gcc)")
    return gcc


@pytest.mark.parametrize("flags", FAST_MATH, ids=[" ".join(f) for f in FAST_MATH])
def test_the_c_policy_refuses_to_compile_under_fast_math(cartpole, tmp_path, flags):
    done = _compile([_gcc(), "-std=c99", *flags], cartpole.integer(), tmp_path)
    assert done.returncode != 0 and f'#error "{REFUSAL}"' in done.stderr


def test_it_compiles_with_ieee_floats_at_every_usual_level(cartpole, tmp_path):
    for level in ("-O0", "-O2", "-O3", "-Os"):
        command = [_gcc(), "-std=c99", level, "-Wall", "-Wextra", "-Werror"]
        done = _compile(command, cartpole.integer(), tmp_path / level)
        assert done.returncode == 0, done.stderr


def test_the_cortex_m4_build_refuses_fast_math_too(cartpole, tmp_path):
    target = TARGETS["cortex-m4"]
    if shutil.which(target.cc) is None:
        pytest.skip(target.missing() or f"{target.cc} is not installed")
    flags = [f for f in target.cflags if not f.startswith("-O")]
    done = _compile([target.cc, *flags, "-Ofast"], cartpole.integer(), tmp_path)
    assert done.returncode != 0 and REFUSAL in done.stderr


@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
def test_nan_and_infinities_enter_as_the_docs_say_and_the_c_policy_follows(which, request, tmp_path):
    """CartPole: raw features; Pendulum: VecNormalize's clip before the grid."""
    _gcc()
    trained = request.getfixturevalue(which)
    policy = trained.integer()
    base = np.asarray(trained.states[0], dtype=np.float32)
    values = (np.nan, np.inf, -np.inf, 1e30, -1e30)
    one = np.arange(base.size)
    probes = np.stack([np.where(one == j, np.float32(v), base) for v in values for j in range(base.size)])
    codes = policy.quantize_input(probes).reshape(len(values), base.size, -1)
    feature = np.array([codes[:, j, j] for j in range(base.size)]).T  # [value, feature]: the probed feature's code
    nan, inf, minus_inf, huge, minus_huge = feature
    qmin, qmax = policy.input.qmin, policy.input.qmax
    assert (nan == qmin).all() and (inf == huge).all() and (minus_inf == minus_huge).all()
    if policy.mean is None:  # no clip: the ends of the grid (with VecNormalize: the codes of +clip and -clip)
        assert (inf == qmax).all() and (minus_inf == qmin).all()
    c = CPolicy(policy, tmp_path)
    assert np.array_equal(c.act(probes), policy.act(probes))
    c.close()
