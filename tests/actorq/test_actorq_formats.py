"""ActorQ with actors in a number format (quant.actor_format, issue 57): the actors round the
published fp32 weights to the format on receipt and act in fp32 on them; the learner's curve states
the actors' action agreement and KL beside its own policy along training; earlier cells keep their keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from quarl.actorq import execution, fidelity, params
from quarl.actorq.networks import q_network
from quarl.actorq.settings import ActorSpec
from quarl.config.cells import resolve
from quarl.quantize import formats
from quarl.store.sqlite import Store
from tests.actorq.test_actorq import DQN
from tests.conftest import compose_cfg, run_quarl


def _published(net: torch.nn.Module) -> tuple[np.ndarray, list[tuple[int, int]]]:
    shapes = params.layer_shapes(net)
    return params.ParameterQuantizer(shapes, 32).pack(net).copy(), shapes


def test_a_format_actor_acts_on_the_weights_ptq_would_give_it():
    """Each layer's [out, in] weight through the format's fake_quantize (blocks along the inputs),
    then fp32: the actor's output is the learner's network on those weights, nothing more."""
    torch.manual_seed(0)
    net = q_network(4, (64, 64), 2)
    packed, shapes = _published(net)
    layers = execution.convert(params.unpack(packed, shapes, 32), 32, "mxfp4")
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    for layer, linear in zip(layers, linears):
        want = formats.get("mxfp4").fake_quantize(linear.weight.detach()).numpy()
        assert np.array_equal(layer.wt.T, want) and layer.wt.dtype == np.float32
    obs = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    with torch.no_grad():
        for linear, layer in zip(linears, layers):
            linear.weight.copy_(torch.from_numpy(layer.wt.T))
        want = net(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(execution.build(layers, 32, squash=False)(obs), want, atol=1e-5)


def test_fidelity_rows_state_agreement_and_kl_and_are_zero_apart_where_the_format_is_exact():
    torch.manual_seed(0)
    net = q_network(4, (64, 64), 2)
    packed, shapes = _published(net)
    spec = ActorSpec(algo="dqn", env={}, obs_dim=4, n_out=2, hidden=(64, 64), actor_bits=32, comm_bits=32,
                     update_period=1, chunk_size=1, n_step=1, gamma=0.99, seed=0, total_steps=1, actors=1,
                     actor_format="mxfp4")
    obs = np.random.default_rng(1).standard_normal((256, 4)).astype(np.float32)
    rows = fidelity.fidelity(spec, packed, obs)
    assert set(rows) == {"train/actor_agreement", "train/actor_kl"}
    assert 0.5 < rows["train/actor_agreement"] <= 1.0 and rows["train/actor_kl"] > 0
    exact = net  # weights already on MXFP8's grid: rounding them again changes nothing
    with torch.no_grad():
        for m in exact.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(formats.get("mxfp8_e4m3").fake_quantize(m.weight))
    same = fidelity.fidelity(ActorSpec(**{**vars(spec), "actor_format": "mxfp8_e4m3"}), _published(exact)[0], obs)
    assert same == {"train/actor_agreement": 1.0, "train/actor_kl": 0.0}
    arrays = {"obs": np.arange(10, dtype=np.float32)[:, None]}
    assert fidelity.recent_observations(arrays, size=10, pos=3)[:, 0].tolist()[:4] == [2.0, 1.0, 0.0, 9.0]


def test_actor_format_keys_only_its_own_cells():
    plain = resolve(compose_cfg("algo=dqn", "quant=actorq"), warn=False)
    fmt = resolve(compose_cfg("algo=dqn", "quant=actorq", "quant.actor_format=mxfp4"), warn=False)
    assert plain[0] == resolve(compose_cfg("algo=dqn", "quant=actorq", "quant.actor_bits=8"), warn=False)[0]
    assert fmt[0] != plain[0] and fmt[1].quant.bits == 4 and fmt[1].quant.actor_bits == 32


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["quant.actor_format=mxfp4", "quant.actor_bits=16"],
         "quant.actor_bits=16 and quant.actor_format=mxfp4 both set the actors' precision"),
        (["quant.actor_format=fp4"], "quant.actor_format=fp4 is not allowed: choose one of fp8_e4m3,"),
    ],
)
def test_a_format_actor_cell_it_cannot_run_is_refused(scratch, overrides, said):
    done = run_quarl(scratch, "algo=dqn", "quant=actorq", *overrides, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and said in out and "Traceback" not in out, out


def test_a_tiny_run_with_nvfp4_actors_records_the_format_and_its_fidelity_curve(scratch):
    done = run_quarl(scratch, *DQN, "quant.actor_format=nvfp4")
    store = Store(scratch / "outputs/results.sqlite")
    run = store.runs().iloc[0]
    assert run["status"] == "done" and run["quant.actor_format"] == "nvfp4" and run["quant.bits"] == 4
    assert run["quant.actor_bits"] == 32 and "nvfp4 actor policy" in done.stdout + done.stderr
    scalars = pd.read_csv(Path(run["run_dir"]) / "curves" / "scalars.csv")  # the learner's curve rows
    rows = scalars.dropna(subset=["train/actor_agreement"])
    assert len(rows) > 0 and rows["train/actor_agreement"].between(0, 1).all() and (rows["train/actor_kl"] >= 0).all()
