"""Settings that could only fail late (after training and calibration) are refused when the config
is checked: a backend that cannot run the policy's network, a budget whose rounding would overflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from quarl.config import backend_registry
from quarl.config.schema import MAX_STEPS, check
from quarl.errors import QuarlError
from tests.conftest import compose_cfg, run_quarl


@pytest.mark.parametrize("backend", [b.name for b in backend_registry.registry().values() if b.mlp_only])
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_an_mlp_only_backend_is_refused_for_a_cnn_policy(backend, algo):
    formats = backend_registry.get(backend).formats  # a backend of a number format's cells: a cell in it
    in_format = [f"quant.format={formats[0]}"] if formats else []
    with pytest.raises(QuarlError) as err:
        check(compose_cfg("env=atari/pong", f"algo={algo}", f"quant.backend={backend}", *in_format))
    assert str(err.value) == (
        f"quant.backend={backend} runs MLP policies only, and env=atari/pong gives images to a CNN policy: use "
        "quant.backend=onnx_int8/auto (or fake) for CNN policies.")


@pytest.mark.parametrize("overrides", [["env=atari/pong", "quant.backend=onnx_int8"],
                                       ["env=atari/pong", "quant.backend=auto"],
                                       ["env=atari/pong", "quant.backend=onnx_int4", "quant.bits=4"],
                                       ["env=cartpole", "quant.backend=c"], ["env=cartpole", "quant.backend=tflite"]])
def test_backends_that_run_the_network_are_accepted(overrides):
    check(compose_cfg(*overrides))


@pytest.mark.parametrize("steps", [MAX_STEPS + 1, 2**63 - 1])
def test_a_budget_past_the_bound_is_refused_with_the_range(steps):
    with pytest.raises(QuarlError) as err:
        check(compose_cfg(f"train.steps={steps}"))
    assert str(err.value) == f"train.steps={steps} is out of range: use 1..1000000000000 env steps (10**12), or null."
    check(compose_cfg(f"train.steps={MAX_STEPS}"))  # the bound itself is a budget


def test_run_py_refuses_a_cnn_on_the_c_backend_before_training(scratch):
    done = run_quarl(scratch, "env=atari/pong", "quant.backend=c", check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in log, log
    assert "quant.backend=c runs MLP policies only, and env=atari/pong gives images to a CNN policy" in log
    assert not (scratch / "outputs/policies").exists() and not (scratch / "outputs/results.sqlite").exists()


def test_a_run_dir_that_cannot_be_written_is_one_sentence_before_hydra_starts(tmp_path):
    """A file where hydra.run.dir needs a folder (on a read-only mount the same check, a folder made
    and removed, gives '... is read-only'): exit 1, one sentence, nothing made."""
    (tmp_path / "file").write_text("in the way")
    done = run_quarl(tmp_path, f"hydra.run.dir={tmp_path / 'file' / 'run'}", check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"hydra.run.dir={tmp_path / 'file' / 'run'} cannot be made: {tmp_path / 'file'} is a file" in done.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(("override", "message"), [
    ("algo.hyperparams.n_steps=0", "algo.hyperparams.n_steps=0 is out of range: use a positive number of steps per"),
    ("algo.hyperparams.batch_size=0", "algo.hyperparams.batch_size=0 is out of range: use a positive batch size."),
    ("algo.hyperparams.gamma=2", "algo.hyperparams.gamma=2 is out of range: use a discount factor from 0 to 1."),
    ("algo.hyperparams.gae_lambda=-0.5", "algo.hyperparams.gae_lambda=-0.5 is out of range: use a value from 0 to 1."),
    ("train.steps=9223372036854775808", "train.steps=9223372036854775808 is out of range: use 1..1000000000000"),
])
def test_hyperparameters_out_of_range_are_refused_in_a_sentence(override, message):
    with pytest.raises(QuarlError) as err:
        check(compose_cfg("algo=ppo", override))
    assert str(err.value).startswith(message)


def test_what_sb3_itself_asserts_is_one_sentence_too():
    """PPO with one env and n_steps=1 passes the ranges; SB3 asserts a rollout of more than one step."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    from quarl.rl import algos

    cfg = compose_cfg("algo=ppo", "algo.n_envs=1", "algo.hyperparams.n_steps=1")
    with pytest.raises(QuarlError, match=r"^algo=ppo cannot be built with algo.policy=MlpPolicy and these "
                                         r"hyperparameters: .*greater than 1"):
        algos.build(cfg.algo, DummyVecEnv([lambda: gym.make("CartPole-v1")]), seed=0, device="cpu", total_steps=64)


def test_a_key_given_twice_is_said_with_the_value_used(scratch):
    from quarl.app import repeated_keys

    assert repeated_keys(["quant.bits=4", "algo=ppo", "+quant.bits=8", "seed=1"]) == [
        "quant.bits is given 2 times (quant.bits=4 +quant.bits=8): the last, +quant.bits=8, is used."]
    assert repeated_keys(["quant=ptq", "quant.bits=4"]) == []
    done = run_quarl(scratch, "quant=fp32", "train.steps=256", "eval.episodes=2", "eval.episodes=1", "eval.n_envs=1",
                     "hydra.callbacks.collate.enabled=false")
    assert ("eval.episodes is given 2 times (eval.episodes=2 eval.episodes=1): the last, eval.episodes=1, is used."
            in done.stdout + done.stderr)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc here")
def test_a_run_dir_in_a_folder_nothing_can_be_made_in_is_one_sentence():
    """/proc takes no folder, even from root (for whom os.access says yes)."""
    from quarl.app import unwritable_dir

    said = unwritable_dir("hydra.run.dir=/proc/x")
    assert said is not None and said.startswith("hydra.run.dir=/proc/x cannot be written (/proc ")
    assert said.endswith("): give a folder quarl may write in.")
    assert unwritable_dir("hydra.sweep.dir=/tmp/quarl-sweep") is None


def test_an_interrupted_actorq_cell_is_not_promised_a_resume():
    from quarl.app import RESUME, resume_note

    assert resume_note(compose_cfg("algo=dqn", "quant=actorq")).endswith(
        "an ActorQ training, which keeps no checkpoint, starts over from step 0.")
    assert resume_note(compose_cfg("algo=dqn", "quant=ptq")) == RESUME


def test_a_cnn_policy_on_vector_observations_is_one_sentence():
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    from quarl.rl import algos

    cfg = compose_cfg("algo=ppo", "algo.policy=CnnPolicy")
    with pytest.raises(QuarlError, match=r"^algo=ppo cannot be built with algo.policy=CnnPolicy and these "
                                         r"hyperparameters: You should use NatureCNN only with images"):
        algos.build(cfg.algo, DummyVecEnv([lambda: gym.make("CartPole-v1")]), seed=0, device="cpu", total_steps=64)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc here")
def test_a_working_folder_nothing_can_be_written_in_is_one_sentence(monkeypatch, tmp_path):
    from quarl.app import unwritable_cwd

    monkeypatch.chdir("/proc")  # as a read-only mount is, even for root
    said = unwritable_cwd(["algo=ppo"])
    assert said is not None and said.startswith("The working folder /proc says: ")
    assert "run it from a folder it may write in, or give hydra.run.dir=DIR" in said
    assert unwritable_cwd(["--help"]) is None and unwritable_cwd([f"hydra.run.dir={tmp_path}"]) is None
    monkeypatch.chdir(tmp_path)
    assert unwritable_cwd(["algo=ppo"]) is None and not list(tmp_path.iterdir())  # the probe leaves nothing
