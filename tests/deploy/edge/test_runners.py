"""quant.backend=c and quant.backend=tflite: the full-integer policy executed like every other
backend (compile_policy -> Runner), bit for bit the integer reference, and a run.py cell whose
record carries its backend_reward, action agreement, latency and bytes."""

from __future__ import annotations

import numpy as np
import pytest

from quarl.config import backend_registry
from quarl.deploy import BACKENDS, CHOICES, compile_policy, measure
from quarl.deploy.execution import LOW
from quarl.errors import QuarlError
from quarl.store import query as results
from tests.conftest import FAST, run_quarl
from tests.test_run import log_of


def _has_litert() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


NO_LITERT = "ai-edge-litert is not installed: pip install 'quarl[edge]'"
BACKEND_PARAMS = ["c", pytest.param("tflite", marks=pytest.mark.skipif(not _has_litert(), reason=NO_LITERT))]


def test_edge_backends_are_choices_but_not_autos():
    edge = {b.name for b in backend_registry.registry().values() if b.calibrated}
    assert {"c", "tflite"} <= edge <= set(CHOICES)  # every calibrated backend of the registry
    assert BACKENDS["c"] == BACKENDS["tflite"] == "int8" and not edge & set(LOW)


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_runner_acts_as_the_integer_reference(backend, cartpole):
    model = cartpole.model_copy()
    runner = compile_policy(model, backend, cartpole.calibration)
    states = cartpole.states[:3000]
    assert np.array_equal(runner(states), runner.integer.act(states))
    assert np.array_equal(runner(states[5]), runner.integer.act(states[5:6]))  # one observation
    assert runner.backend == backend and runner.precision == "int8" and 0 < runner.nbytes < 20_000
    assert np.mean(runner(states) == cartpole.fp32.act(states)) >= 0.85
    latency = measure(runner, states[:1], warmup=5, calls=20)
    assert latency["median_ms"] > 0


def test_without_calibration_states_or_record_ranges_the_backend_says_what_it_needs(cartpole):
    with pytest.raises(QuarlError, match="The observation's range is unknown: pass calibration observations"):
        compile_policy(cartpole.model_copy(), "c", cartpole.states[:1])


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_a_run_records_the_executed_full_integer_policy(backend, scratch, shared_policies):
    """A PTQ cell with 8-bit activations and inputs carries every range it needs: the pipeline runs
    it on the edge backend and records what the deployed policy scores."""
    done = run_quarl(
        scratch, *FAST, "quant.act_bits=8", "quant.input_bits=8", f"quant.backend={backend}", policies=shared_policies
    )
    cell = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    assert cell["backend"] == backend and cell["backend_precision"] == "int8"
    assert cell["backend_reward"] == pytest.approx(cell["reward_mean"], rel=0.3)  # same episodes, int8 arithmetic
    agreeing = cell["backend_action_agreement"] * cell["agreement_states"]  # a count over the record's states
    assert cell["agreement_states"] > 0 and agreeing == pytest.approx(round(agreeing), abs=1e-6)
    assert 0 < cell["latency_ms"] < 100 and cell["backend_bytes"] > 0
    assert f"Executed on {backend} (int8)" in log_of(done)
