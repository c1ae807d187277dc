"""A pretrained policy's files run no code: a crafted config.yml, vecnormalize.pkl or model.zip
given as policy.path is refused in one sentence and its payload never runs; a genuine SB3 /
rl-zoo3 folder still loads; policy.trust=true lets the crafted files run, and the cache keeps
their safe form."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import sqlite3
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import pytest
import yaml
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from quarl.errors import QuarlError
from quarl.train import untrusted, zoo_yaml
from tests.conftest import run_quarl

ENV_ID = "CartPole-v1"
QUIET = ["quant=fp32", "eval.episodes=2", "eval.n_envs=2", "hydra.callbacks.collate.enabled=false"]


class Touch:
    """Unpickled, it runs `touch MARKER` (pickle calls os.system with the reduce tuple's arguments)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def _venv() -> DummyVecEnv:
    return DummyVecEnv([lambda: gym.make(ENV_ID)])


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO trained on CartPole with VecNormalize, saved in rl-zoo3's log layout:
    <EnvId>.zip, <EnvId>/config.yml (rl-zoo3's OrderedDict dump) and <EnvId>/vecnormalize.pkl.
    Its learning rate is a function, which SB3 pickles by value, as older rl-zoo3 models hold."""
    folder = tmp_path_factory.mktemp("zoo") / "ppo" / f"{ENV_ID}_1"
    (folder / ENV_ID).mkdir(parents=True)
    venv = VecNormalize(_venv())
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu",
                learning_rate=lambda progress: 3e-4 * progress)
    model.learn(256)
    model.save(folder / f"{ENV_ID}.zip")
    venv.save(str(folder / ENV_ID / "vecnormalize.pkl"))
    hyperparams = OrderedDict([("n_steps", 128), ("normalize", True), ("policy", "MlpPolicy")])
    (folder / ENV_ID / "config.yml").write_text(yaml.dump(hyperparams))  # as rl-zoo3's train writes it
    return folder


def _copy(genuine: Path, to: Path) -> Path:
    shutil.copytree(genuine, to)
    return to


def _craft_config(folder: Path, marker: Path) -> None:
    (folder / ENV_ID / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        "- - - n_steps\n    - 128\n"
        f"  - - normalize\n    - !!python/object/apply:os.system [\"touch {marker}\"]\n"
        "  - - policy\n    - MlpPolicy\n"
    )


def _craft_normalize(folder: Path, marker: Path, into: Path | None = None) -> None:
    """The genuine statistics, with one more attribute whose unpickling runs os.system (written to
    `into`, else over the folder's own)."""
    path = folder / ENV_ID / "vecnormalize.pkl"
    normalizer = VecNormalize.load(str(path), _venv())
    normalizer.payload = Touch(marker)  # type: ignore[attr-defined]
    (into or path).write_bytes(pickle.dumps(normalizer))


def _craft_model(model_zip: Path, marker: Path, key: str = "payload") -> None:
    """The genuine zip, with a `:serialized:` cloudpickle entry in its data that runs os.system."""
    with zipfile.ZipFile(model_zip) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    data = json.loads(entries["data"])
    data[key] = {":type:": "<class 'int'>", ":serialized:": base64.b64encode(cloudpickle.dumps(Touch(marker))).decode()}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model_zip, "w") as archive:
        for name, payload in entries.items():
            archive.writestr(name, payload)


# ------------------------------------------------------------------------------------------ in process


def test_rl_zoo3_yaml_loads_and_python_tags_are_refused(tmp_path: Path) -> None:
    saved = OrderedDict([("batch_size", 256), ("learning_rate", "lin_0.001"), ("normalize", "{'norm_obs': True}"),
                         ("policy_kwargs", "dict(net_arch=[64, 64])"), ("frame_stack", (4,))])
    config = tmp_path / "config.yml"
    config.write_text(yaml.dump(saved))  # rl-zoo3's dump: !!python/object/apply:collections.OrderedDict
    assert zoo_yaml.read_yaml(config) == saved
    marker = tmp_path / "ran"
    for text in (f'!!python/object/apply:os.system ["touch {marker}"]\n',
                 f'a: !!python/object/apply:subprocess.call [["touch", "{marker}"]]\n',
                 "a: !!python/name:os.system\n",
                 "!!python/object/apply:collections.OrderedDict\n- - - a\n    - !!python/object/new:os.system [x]\n"):
        config.write_text(text)
        with pytest.raises(untrusted.Untrusted, match=r"config\.yml holds the YAML tag !!python/.*policy\.trust=true"):
            zoo_yaml.read_yaml(config)
    assert not marker.exists()
    config.write_text(f'a: !!python/object/apply:os.system ["touch {marker}"]\n')
    assert zoo_yaml.read_yaml(config, trust=True) == {"a": 0} and marker.exists()  # trusted: rl-zoo3's loader


def test_restricted_unpickler_reads_statistics_and_refuses_code(genuine: Path, tmp_path: Path) -> None:
    folder = _copy(genuine, tmp_path / "crafted")
    normalizer = untrusted.load_normalizer(folder / ENV_ID / "vecnormalize.pkl", _venv)
    assert isinstance(normalizer, VecNormalize) and normalizer.obs_rms.mean.shape == (4,)
    marker = tmp_path / "ran"
    _craft_normalize(folder, marker)
    with pytest.raises(untrusted.Untrusted, match=r"vecnormalize\.pkl names posix\.system, .*policy\.trust=true"):
        untrusted.load_normalizer(folder / ENV_ID / "vecnormalize.pkl", _venv)
    assert not marker.exists()
    for payload in (pickle.dumps(Touch(marker)), cloudpickle.dumps(lambda: 0), pickle.dumps(shutil.rmtree),
                    pickle.dumps(QuarlError)):
        with pytest.raises(pickle.UnpicklingError):
            untrusted.restricted_loads(payload)
    assert not marker.exists()


@pytest.mark.parametrize("cls, env_id", [(PPO, "CartPole-v1"), (A2C, "CartPole-v1"), (DQN, "CartPole-v1"),
                                         (SAC, "Pendulum-v1"), (TD3, "Pendulum-v1"), (DDPG, "Pendulum-v1")])
def test_every_algorithm_loads_without_deserializing_code(cls: Any, env_id: str, tmp_path: Path) -> None:
    """SB3's saved data of each algorithm is answered by custom_objects: the network, its settings
    and the spaces by the restricted unpickler, the training state replaced; acts as SB3's load does."""
    kwargs = {"buffer_size": 100} if cls in (DQN, SAC, TD3, DDPG) else {}
    model = cls("MlpPolicy", env_id, seed=0, device="cpu", **kwargs)
    model.save(tmp_path / "model.zip")
    objects = untrusted.custom_objects(tmp_path / "model.zip")
    serialized = {k for k, v in untrusted.model_data(tmp_path / "model.zip").items()
                  if isinstance(v, dict) and ":serialized:" in v}
    assert set(objects) == serialized  # SB3 deserializes none of them
    loaded = untrusted.load_model(cls, tmp_path / "model.zip")
    untrusted.write_safe_model(tmp_path / "model.zip", tmp_path / "safe.zip")
    safe = untrusted.load_model(cls, tmp_path / "safe.zip")
    reference = cls.load(tmp_path / "model.zip", device="cpu")
    obs = reference.observation_space.sample()
    expected = reference.predict(obs, deterministic=True)[0]
    assert (loaded.predict(obs, deterministic=True)[0] == expected).all()
    assert (safe.predict(obs, deterministic=True)[0] == expected).all()


def test_crafted_model_entries_are_refused_or_never_read(genuine: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    model_zip = tmp_path / "model.zip"
    for key in ("payload", "policy_class", "observation_space"):
        shutil.copy(genuine / f"{ENV_ID}.zip", model_zip)
        _craft_model(model_zip, marker, key)
        with pytest.raises(untrusted.Untrusted, match=rf"model\.zip holds a pickled Python object in its data \({key}, "
                                                       r"naming posix\.system\).*policy\.trust=true"):
            untrusted.load_model(PPO, model_zip)
    shutil.copy(genuine / f"{ENV_ID}.zip", model_zip)
    _craft_model(model_zip, marker, "learning_rate")  # training state: answered, never unpickled
    assert untrusted.load_model(PPO, model_zip).learning_rate == 0.0
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ end to end


def _refused(done: Any, *names: str) -> str:
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    assert "policy.trust=true" in output and all(name in output for name in names), output
    return output


def test_crafted_files_given_as_policy_path_run_no_code(genuine: Path, tmp_path: Path) -> None:
    crafts = {"config.yml": _craft_config, "vecnormalize.pkl": _craft_normalize,
              f"{ENV_ID}.zip": lambda folder, marker: _craft_model(folder / f"{ENV_ID}.zip", marker)}
    for name, craft in crafts.items():
        folder = _copy(genuine, tmp_path / f"crafted-{name}")
        marker = tmp_path / f"ran-{name}"
        craft(folder, marker)
        done = run_quarl(tmp_path, "policy.source=path", f"policy.path={folder}", *QUIET, check=False)
        _refused(done, name)
        assert not marker.exists(), name
    policies = tmp_path / "outputs" / "policies"
    assert not list(policies.glob("*/meta.json")) and not list(policies.glob("*.tmp-*"))  # nothing cached


def test_genuine_folder_loads_and_trust_lets_crafted_files_run_once(genuine: Path, tmp_path: Path) -> None:
    done = run_quarl(tmp_path, "policy.source=path", f"policy.path={genuine}", *QUIET)
    assert "with its VecNormalize statistics" in done.stdout + done.stderr

    folder = _copy(genuine, tmp_path / "crafted")
    markers = {name: tmp_path / f"ran-{name}" for name in ("config", "normalize", "model")}
    _craft_config(folder, markers["config"])
    _craft_normalize(folder, markers["normalize"])
    _craft_model(folder / f"{ENV_ID}.zip", markers["model"])
    crafted = ["policy.source=path", f"policy.path={folder}", *QUIET]
    run_quarl(tmp_path, *crafted, "policy.trust=true", "store.path=outputs/trusted.sqlite")
    assert all(m.exists() for m in markers.values())  # trusted: read as SB3 and rl-zoo3 read them

    # the cache holds the safe form: the same policy, read again without trust, runs nothing
    for marker in markers.values():
        marker.unlink()
    (cached,) = [p.parent for p in (tmp_path / "outputs" / "policies").glob("*/meta.json")
                 if json.loads(p.read_text())["source"]["from"] == str(folder)]
    assert "payload" not in untrusted.model_data(cached / "model.zip")
    untrusted.load_normalizer(cached / "vecnormalize.pkl", _venv)  # the restricted unpickler reads it
    run_quarl(tmp_path, *crafted, "store.path=outputs/again.sqlite")
    assert not any(m.exists() for m in markers.values())
    with sqlite3.connect(tmp_path / "outputs" / "again.sqlite") as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("done",)]

    # a crafted file in the cache (copied there by an older quarl) is refused by name too
    _craft_normalize(genuine, markers["normalize"], into=cached / "vecnormalize.pkl")
    done = run_quarl(tmp_path, *crafted, "store.path=outputs/stale.sqlite", check=False)
    _refused(done, str(cached / "vecnormalize.pkl"))
    assert not markers["normalize"].exists()


def test_a_deleted_model_zip_is_named_as_it_is(genuine: Path, tmp_path: Path) -> None:
    run_quarl(tmp_path, "policy.source=path", f"policy.path={genuine}", *QUIET)
    (cached,) = [p for p in (tmp_path / "outputs" / "policies").iterdir() if (p / "model.zip").exists()]
    (cached / "model.zip").unlink()
    done = run_quarl(tmp_path, "policy.source=path", f"policy.path={genuine}", *QUIET,
                     "store.path=outputs/deleted.sqlite", check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in output, output
    assert f"{cached / 'model.zip'}'" in output and "model.zip.zip" not in output, output


def test_other_bad_statistics_and_configs_are_refused_by_name(genuine: Path, tmp_path: Path) -> None:
    out = tmp_path / "safe.pkl"
    damaged = tmp_path / "damaged.pkl"
    damaged.write_bytes((genuine / ENV_ID / "vecnormalize.pkl").read_bytes()[:100])
    other = tmp_path / "other.pkl"
    other.write_bytes(pickle.dumps({"mean": 0.0}))
    pendulum = tmp_path / "pendulum.pkl"  # statistics of 3 observations, for CartPole's 4
    VecNormalize(DummyVecEnv([lambda: gym.make("Pendulum-v1")])).save(str(pendulum))
    for path, message in ((damaged, "cannot be read as VecNormalize statistics"),
                          (other, "is not VecNormalize statistics: it holds a dict"),
                          (pendulum, r"holds observation statistics of shape \(3,\), but the env's are \(4,\)")):
        with pytest.raises(QuarlError, match=rf"{path.name} {message}"):
            untrusted.write_safe_normalizer(path, out, _venv)
    assert not out.exists()
    untrusted.write_safe_normalizer(genuine / ENV_ID / "vecnormalize.pkl", out, _venv)
    assert untrusted.restricted_loads(out.read_bytes()).obs_rms.count > 256  # the safe form: statistics only

    from quarl.train.pretrained import hyperparams

    config = tmp_path / "config.yml"
    config.write_text("- a\n- b\n")
    with pytest.raises(QuarlError, match="it holds a list, not its hyperparameters by name"):
        hyperparams(config)
    config.write_text("!!python/object/apply:collections.OrderedDict [abc]\n")
    with pytest.raises(QuarlError, match="is not a readable rl-zoo3 config.yml"):
        hyperparams(config)


def _alias_bomb(levels: int = 9) -> str:
    """A YAML document of `levels` nested aliases, each level nine of the one before (9^9 strings once expanded)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("trust", [False, True])
def test_an_alias_bomb_a_self_reference_and_a_huge_config_are_refused_in_a_sentence(tmp_path: Path, trust) -> None:
    config = tmp_path / "config.yml"
    config.write_text(_alias_bomb())
    assert len(config.read_bytes()) < 600
    with pytest.raises(QuarlError, match=r"config\.yml is refused: its aliases expand to more than 100,000 nodes \("):
        zoo_yaml.read_yaml(config, trust)
    config.write_text("a: &a [1, *a]\n")
    with pytest.raises(QuarlError, match="is refused: an alias refers to the node that holds it"):
        zoo_yaml.read_yaml(config, trust)
    config.write_text("a: [" + "1, " * (zoo_yaml.YAML_MAX_BYTES // 3) + "1]\n")
    with pytest.raises(QuarlError, match=r"config\.yml is 1,048,5\d\d bytes, and quarl reads a config\.yml of at most"):
        zoo_yaml.read_yaml(config, trust)
    config.write_text("a: &a [1, 2]\nb: *a\n")  # a few aliases are YAML as any other
    assert zoo_yaml.read_yaml(config, trust) == {"a": [1, 2], "b": [1, 2]}


def test_an_alias_bomb_given_as_policy_path_ends_in_a_sentence_within_seconds(genuine: Path, tmp_path: Path) -> None:
    import time

    folder = _copy(genuine, tmp_path / "bomb")
    (folder / ENV_ID / "config.yml").write_text(_alias_bomb())
    start = time.monotonic()
    done = run_quarl(tmp_path, "policy.source=path", f"policy.path={folder}", *QUIET, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in output and time.monotonic() - start < 10, output
    assert f"{folder / ENV_ID / 'config.yml'} is refused: its aliases expand to more than 100,000 nodes" in output


def test_statistics_larger_than_any_policy_has_are_refused_before_they_are_read(tmp_path: Path) -> None:
    path = tmp_path / "vecnormalize.pkl"
    with path.open("wb") as file:
        file.truncate(untrusted.NORMALIZER_MAX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(QuarlError, match=r"vecnormalize\.pkl is 67,108,865 bytes, and quarl reads VecNormalize "):
        untrusted.read_normalizer(path)


def test_weights_that_name_code_are_refused_in_one_sentence(genuine: Path, tmp_path: Path) -> None:
    import io

    import torch

    model_zip = tmp_path / "model.zip"
    marker = tmp_path / "ran"
    with zipfile.ZipFile(genuine / f"{ENV_ID}.zip") as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    weights = torch.load(io.BytesIO(entries["policy.pth"]), weights_only=True)
    crafted = io.BytesIO()
    torch.save({**weights, "payload": Touch(marker)}, crafted)
    entries["policy.pth"] = crafted.getvalue()
    with zipfile.ZipFile(model_zip, "w") as archive:
        for name, payload in entries.items():
            archive.writestr(name, payload)
    with pytest.raises(untrusted.Untrusted) as refused:
        untrusted.load_model(PPO, model_zip)
    assert str(refused.value) == (
        f"{model_zip} holds weights (*.pth) that name posix.system, which can run code when loaded: SB3 and quarl "
        "read a model's weights as tensors only, so this is no model SB3 saved; give the model zip saved by SB3 or "
        "rl-zoo3.")
    assert not marker.exists()


def test_trust_set_in_a_config_file_is_not_trust(genuine: Path, tmp_path: Path) -> None:
    """A config file of the user's that says `policy.trust: true` grants nothing: only the command
    line of the run does (a file written earlier cannot decide what runs)."""
    folder = _copy(genuine, tmp_path / "crafted")
    marker = tmp_path / "ran"
    _craft_normalize(folder, marker)
    group = tmp_path / "conf" / "mine"
    group.mkdir(parents=True)
    (group / "trusting.yaml").write_text("# @package _global_\npolicy:\n  trust: true\n")
    done = run_quarl(tmp_path, "--config-dir", str(tmp_path / "conf"), "+mine=trusting", "policy.source=path",
                     f"policy.path={folder}", *QUIET, check=False)
    _refused(done, "vecnormalize.pkl")
    assert not marker.exists() and "comes from a config file, not this command line" in done.stdout + done.stderr
