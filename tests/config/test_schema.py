"""Every config composes; typos, wrong types and meaningless values are rejected with the field named."""

import itertools
import json
import re
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import open_dict
from omegaconf.errors import ValidationError

from quarl.app import CONF_DIR
from quarl.config import method_registry
from quarl.config.keys import cell_key
from quarl.config.schema import check, check_overrides
from quarl.errors import QuarlError
from quarl.rl.algos import ALGOS, hyperparams, linear_schedule
from quarl.rl.baseline import fp32_flag
from quarl.rl.matrix import env_choices
from tests.conftest import ROOT, compose_cfg

ALGO_NAMES = sorted(p.stem for p in (CONF_DIR / "algo").glob("*.yaml"))
ENV_NAMES = env_choices(CONF_DIR)
# SB3 models are built for the classic envs and one env of every other suite (CNN on Atari).
BUILT_ENVS = [e for e in ENV_NAMES if "/" not in e] + [
    "atari/breakout", "box2d/bipedalwalker", "box2d/lunarlander", "bullet/walker2d", "mujoco/halfcheetah",
    "dmc/walker_stand"]
QUANT_NAMES = sorted(p.stem for p in (CONF_DIR / "quant").glob("*.yaml"))


def test_groups_cover_the_issue():
    assert {"dqn", "a2c", "ppo", "ddpg"} <= set(ALGO_NAMES) == set(ALGOS)
    classic = {"cartpole", "acrobot", "mountaincar", "mountaincar_continuous", "pendulum"}
    box2d = {"box2d/lunarlander", "box2d/lunarlander_continuous", "box2d/bipedalwalker"}
    atari = {f"atari/{g}" for g in ("breakout", "spaceinvaders", "beamrider", "mspacman", "qbert", "seaquest", "pong")}
    bullet, mujoco = {"bullet/halfcheetah", "bullet/walker2d"}, {"mujoco/halfcheetah", "mujoco/walker2d"}
    dmc = {f"dmc/{t}" for t in ("cartpole_balance", "walker_stand", "hopper_stand", "reacher_hard", "cheetah_run",
                                "finger_spin", "humanoid_stand", "humanoid_walk")}
    assert classic | box2d | atari | bullet | mujoco | dmc <= set(ENV_NAMES)
    assert {"fp32", "fp16", "ptq"} <= set(QUANT_NAMES)


@pytest.mark.parametrize("algo, env", list(itertools.product(ALGO_NAMES, ENV_NAMES)))
def test_every_algo_env_pair_composes_and_passes_checks(algo, env):
    cfg = compose_cfg(f"algo={algo}", f"env={env}", *(["quant=actorq"] if algo == "d4pg" else []))
    check(cfg)
    assert cfg.algo.name == algo and cfg.env.name == env
    tuned = CONF_DIR / "tuned" / algo / f"{env}.yaml"
    if tuned.exists():  # rl-zoo3's budget replaces the algorithm's default
        text = tuned.read_text()
        shared = re.search(r"- (/tuned/\S+)@_here_", text)  # every Atari game includes one shared entry
        if shared:
            text = (CONF_DIR / f"{shared.group(1)[1:]}.yaml").read_text()
        assert f"n_timesteps: {cfg.algo.n_timesteps}" in text
    hyperparams(cfg.algo, cfg.algo.n_timesteps)  # schedules and policy kwargs parse


@pytest.mark.parametrize("quant", QUANT_NAMES)
def test_quant_configs_compose(quant):
    check(compose_cfg(f"quant={quant}", *(["algo=dqn"] if quant == "actorq" else [])))


def test_tuned_values_apply_and_overrides_win():
    cfg = compose_cfg("algo=dqn", "env=cartpole")
    assert cfg.algo.n_timesteps == 50000 and cfg.algo.hyperparams.learning_rate == 0.0023
    cfg = compose_cfg("algo=dqn", "env=cartpole", "algo.hyperparams.learning_rate=0.01")
    assert cfg.algo.hyperparams.learning_rate == 0.01


def test_train_steps_shrinks_step_counts():
    cfg = compose_cfg("algo=dqn", "env=cartpole")
    assert hyperparams(cfg.algo, 5000)["learning_starts"] == 100  # 1000 * 5000 / 50000
    assert hyperparams(cfg.algo, 10**6)["learning_starts"] == 1000  # never grows


@pytest.mark.parametrize(
    "override",
    ["quant.bits=eight", "eval.episodes=many", "seed=x", "algo.n_envs=1.5"],
)
def test_wrong_types_are_rejected_at_composition(override):
    with pytest.raises((ConfigCompositionException, ValidationError)) as err:
        compose_cfg(override)
    assert override.split("=")[0] in str(err.value) or "could not be converted" in str(err.value)


def test_unknown_keys_and_options_are_rejected():
    with pytest.raises(ConfigCompositionException, match="quant.bitz"):
        compose_cfg("quant.bitz=4")
    with pytest.raises(ConfigCompositionException, match="algo/nope"):
        compose_cfg("algo=nope")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["quant.bits=1"], "quant.bits=1 is out of range: use 2..16, or 32"),
        (["quant.bits=33"], "quant.bits=33 is out of range"),
        (["quant.bits=24"], "quant.bits=24 is out of range"),
        (["quant.scheme=log"],
         "quant.scheme=log is not allowed: choose one of affine, symmetric, quarl_code, published"),
        (["quant.scheme=paper"], "quant.scheme=paper is ambiguous and no longer accepted: use quant.scheme=quarl_code"),
        (["quant.granularity=per_row"], "quant.granularity=per_row is not allowed"),
        (["quant.scheme=published", "quant.granularity=per_channel"],
         "quant.scheme=published is one of QuaRL's per-tensor"),
        (["quant.scheme=quarl_code", "quant.granularity=per_channel"], "quant.scheme=quarl_code is one of QuaRL's"),
        (["eval.episodes=0"], "eval.episodes=0 must be a positive"),
        (["eval.episodes=-3"], "eval.episodes=-3 must be a positive"),
        (["eval.workers=0"], "eval.workers=0 must be at least 1"),
        (["train.steps=0"], "train.steps=0 must be a positive"),
        (["train.device=tpu"], "train.device=tpu is not allowed"),
    ],
)
def test_meaningless_values_get_one_sentence(overrides, message):
    with pytest.raises(QuarlError, match=message.replace("(", r"\(").replace(".", r"\.")):
        check(compose_cfg(*overrides))


def test_schema_is_not_offered_as_an_option():
    with pytest.raises(ConfigCompositionException) as err:
        compose_cfg("algo=nope")
    assert "schema" not in str(err.value).split("Available options")[1].split("Config search path")[0]


def test_sweeps_folder_exists():
    assert (CONF_DIR / "sweep").is_dir() and not (CONF_DIR / "sweep").is_symlink()


@pytest.mark.parametrize("algo, env", list(itertools.product([a for a in ALGO_NAMES if ALGOS[a].cls], BUILT_ENVS)))
def test_every_compatible_pair_builds_its_sb3_model(algo, env):
    from stable_baselines3.common.env_util import make_vec_env

    from quarl.rl.algos import build, spec
    from quarl.rl.envs import action_kind, make_env

    cfg = compose_cfg(f"algo={algo}", f"env={env}")  # the composition the test above checked (one env built here)
    if action_kind(cfg.env) not in spec(algo).action_kinds:
        pytest.skip("n/a pair")
    venv = make_vec_env(lambda: make_env(cfg.env), n_envs=1)
    with open_dict(cfg.algo.hyperparams):
        if "buffer_size" in cfg.algo.hyperparams or algo in ("dqn", "ddpg", "td3", "sac"):
            cfg.algo.hyperparams.buffer_size = 1000
    model = build(cfg.algo, venv, seed=0, device="cpu", total_steps=1000)
    assert type(model).__name__.lower() == algo


def test_a_key_no_part_of_the_run_reads_is_refused_naming_what_is_taken():
    with pytest.raises(QuarlError, match=r"quant\.bitz is not a setting of quant=ptq \(did you mean quant\.bits\?\)"):
        check(compose_cfg("+quant.bitz=4"))
    with pytest.raises(QuarlError, match=r"quant\.act_bits is not a setting of quant=fp16: it takes quant\.method"):
        check(compose_cfg("quant=fp16", "+quant.act_bits=8"))
    with pytest.raises(QuarlError, match=r"evall is not a setting of quarl \(did you mean eval\?\): it takes algo"):
        check(compose_cfg("+evall=1"))
    check(compose_cfg("+algo.hyperparams.vf_coef=0.4", "+env.kwargs.max_episode_steps=100"))  # free-form mappings


@pytest.mark.parametrize("value", ["2", "yes", "1", "on"])  # OmegaConf takes each as a boolean
def test_a_boolean_is_true_or_false(value):
    with pytest.raises(QuarlError, match=f"train.keep_best={value} is not allowed: use train.keep_best=true"):
        check_overrides(compose_cfg(f"train.keep_best={value}"), [f"train.keep_best={value}"])


def test_true_and_false_are_booleans():
    check_overrides(compose_cfg("train.keep_best=true"), ["train.keep_best=true", "train.progress=False", "seed=3"])


@pytest.mark.parametrize("seed", [-1, 2**31, 4294967296])
def test_a_seed_must_fit_32_bits(seed):
    with pytest.raises(QuarlError, match=f"seed={seed} is out of range: use an integer from 0 to 2147483647"):
        check(compose_cfg(f"seed={seed}"))


@pytest.mark.parametrize("method, bits", [("fp16", 16), ("bf16", 16), ("fp32", 32)])
def test_a_float_method_records_the_width_it_uses(method, bits, caplog):
    cfg = compose_cfg(f"quant={method}", "quant.bits=4")
    key = cell_key(cfg)
    method_registry.settle(cfg, warn=True)
    assert cfg.quant.bits == bits and cell_key(cfg) == key  # the cell is the one it always was
    assert f"quant={method} runs at {bits} bits: quant.bits=4 does not apply to it" in caplog.text
    caplog.clear()
    method_registry.settle(compose_cfg(f"quant={method}", "quant.bits=8"), warn=False)  # a sweep over shared settings
    assert "does not apply" not in caplog.text


def test_actorq_records_its_actors_width():
    cfg = compose_cfg("algo=dqn", "quant=actorq", "quant.actor_bits=16")
    method_registry.settle(cfg, warn=False)
    assert cfg.quant.bits == 16


def test_lin_schedules_stop_at_zero_past_the_budget():
    schedule = linear_schedule(1e-3)
    assert schedule(1.0) == 1e-3 and schedule(0.5) == pytest.approx(5e-4)
    assert schedule(-0.02) == 0.0  # SB3's last rollout past the budget: never a negative learning rate


@pytest.mark.parametrize(
    "env, reward, flag",
    [
        ("acrobot", -500.0, "not learned"),
        ("cartpole", 14.5, "not learned"),
        ("cartpole", 300.0, "not solved"),  # below CartPole-v1's reward threshold 475
        ("cartpole", 500.0, None),
        ("pendulum", -150.0, None),  # no reward threshold; far better than random (-1208)
        ("atari/pong", -21.0, "not learned"),
    ],
)
def test_an_unlearned_fp32_policy_is_flagged(env, reward, flag):
    found = fp32_flag(compose_cfg(f"env={env}").env, reward)
    assert (found[0] if found else None) == flag


def test_old_records_keep_their_cell_keys(monkeypatch):
    """Records written before the width fix (an fp16 record of a named sweep says quant.bits=8) and
    before env.random_return: today's composition of the same command gives the same cell key, so
    an old store's done cells are still skipped. A record trained on a GPU is composed as on a
    machine with CUDA (its key holds the device), with its own actorq.cuda_graph."""
    import torch

    records = sorted((ROOT / "docs/reproduction/records").glob("*.record.json"))
    checked = {"fp16": 0, "ptq": 0, "actorq": 0}
    for path in records:
        record = json.loads(path.read_text())
        run = record["run"]
        if run["status"] != "done" or checked.get(run["quant"], 15) >= 15:
            continue
        overrides = Path(run["run_dir"]).name.split(",")
        chosen = dict(o.split("=", 1) for o in overrides if "=" in o).get("quant", "ptq")
        if not all("=" in o for o in overrides) or "+sweep" not in run["run_dir"] or chosen != run["quant"]:
            continue  # not a named sweep's cell, or the fp32 baseline a quantized cell recorded
        cuda = run.get("training_device") == "cuda"
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        if run["quant"] == "actorq":  # the actorq_gpu sweep has captured its updates since; its older cells did not
            overrides.append(f"actorq.cuda_graph={str(record['config']['actorq'].get('cuda_graph', False)).lower()}")
        cfg = compose_cfg(*overrides)
        method_registry.settle(cfg, warn=False)
        assert cell_key(cfg) == run["cell_key"], (path.name, overrides)
        checked[run["quant"]] += 1
    assert min(checked.values()) >= 5, checked


@pytest.mark.parametrize("algo, env", [("dqn", "cartpole"), ("a2c", "cartpole"), ("ppo", "cartpole"),
                                       ("ddpg", "mountaincar_continuous")])
def test_zoo_sb2_replaces_rl_zoo3s_values_by_the_published_agents(algo, env):
    published, tuned = compose_cfg(f"algo={algo}", f"env={env}", "zoo=sb2"), compose_cfg(f"algo={algo}", f"env={env}")
    check(published)
    assert published.zoo == "sb2" and tuned.zoo == "rl_zoo3"
    text = (CONF_DIR / "tuned" / "sb2" / algo / f"{env}.yaml").read_text()
    assert f"n_timesteps: {published.algo.n_timesteps}" in text
    assert set(published.algo.hyperparams) == set(yaml.safe_load(text)["hyperparams"])  # none of rl-zoo3's left
    hyperparams(published.algo, published.algo.n_timesteps)
    assert cell_key(published) != cell_key(tuned)


def test_zoo_sb2_pairs_it_has_no_agent_for_are_na():
    from quarl.errors import IncompatibleCell
    from quarl.rl.matrix import check_zoo

    with pytest.raises(IncompatibleCell, match="zoo=sb2 has hyperparameters for a2c/cartpole, ddpg/mountaincar_"):
        check_zoo(compose_cfg("algo=ppo", "env=acrobot", "zoo=sb2"))
    check_zoo(compose_cfg("algo=ppo", "env=acrobot"))  # rl-zoo3: the algorithm's defaults where it has none
