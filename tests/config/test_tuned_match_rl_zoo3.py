"""conf/tuned's copies of rl-zoo3 hold rl-zoo3's values, setting by setting, as quarl runs them.

Every file of conf/tuned outside sb2/ names its source in its header, `# rl-zoo3 hyperparams/<algo>.yml,
<env id>` (`atari`: rl-zoo3's one entry for every game), or includes a shared file that does
(`defaults: - /tuned/_atari/<algo>@_here_`), which is then checked through each game that includes it.
The (algo, env) config quarl composes (the schema's defaults, conf/algo/<algo>.yaml, the shared file, the
tuned file, conf/env/<env>.yaml) is compared with that entry of the installed rl_zoo3's hyperparams/<algo>.yml,
read as rl-zoo3's ExperimentManager reads it:

- n_timesteps, policy, n_envs (rl-zoo3 trains with 1 where its entry has none);
- normalize: true, or a dict of VecNormalize arguments (quarl: normalize and normalize_kwargs; both
  discount with the algorithm's gamma);
- noise_type ('ornstein-uhlenbeck' is quarl's ornstein_uhlenbeck) and, where noise is on, noise_std;
- frame_stack: the env's frame_stack; env_wrapper: the env's suite (quarl.rl.envs wraps the atari suite in
  SB3's AtariWrapper, the only wrapper these entries name);
- every other key: algo.hyperparams.<key>, both ways (a key on one side only is a difference), with
  policy_kwargs' "dict(...)" read as the literal it is and its classes named as quarl names them
  (quarl.rl.algos.ACTIVATIONS, OPTIMIZERS), and a lin_<x> schedule compared by its x.

A value quarl deliberately sets otherwise is written in the tuned file, with a trailing comment
`# not rl-zoo3: <why>` on its line (docs/configuration.md); the markers are read from the files, and a
marker on a value that equals rl-zoo3's fails too, so that none outlives its reason.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from quarl.app import CONF_DIR
from quarl.config.schema import AlgoConfig, EnvConfig
from tests.conftest import compose_cfg

rl_zoo3 = pytest.importorskip("rl_zoo3")  # the test extra installs it

TUNED = CONF_DIR / "tuned"
ZOO = Path(rl_zoo3.__file__).parent / "hyperparams"
SOURCE = re.compile(r"^# rl-zoo3 hyperparams/(?P<algo>\w+)\.yml, (?P<env_id>\S+)", re.MULTILINE)
SHARED = re.compile(r"^\s*- /tuned/(?P<path>\S+)@_here_\s*$", re.MULTILINE)
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):")
MARKER = re.compile(r"#\s*not rl-zoo3\b[^:]*:(?P<why>.*)$")
ATARI_WRAPPER = ["stable_baselines3.common.atari_wrappers.AtariWrapper"]
ABSENT = "<not set>"


def _tuned_files() -> list[Path]:
    return sorted(TUNED.rglob("*.yaml"))


def _shared(path: Path) -> Path | None:
    """The shared file `path` includes (`- /tuned/<x>@_here_`), if any."""
    found = SHARED.search(path.read_text())
    return TUNED / f"{found['path'].removeprefix('tuned/')}.yaml" if found else None


def _source(path: Path) -> tuple[str, str] | None:
    """(rl-zoo3 algo file, env id) the header of `path` (or of the file it includes) names, or None."""
    found = SOURCE.search(path.read_text())
    if found:
        return found["algo"], found["env_id"]
    shared = _shared(path)
    return _source(shared) if shared is not None else None


def _pairs() -> list[tuple[str, str]]:
    """Every (algo, env) with a tuned file of quarl's default zoo (not sb2/, not the shared _atari/)."""
    pairs = []
    for path in _tuned_files():
        algo, *env = path.relative_to(TUNED).with_suffix("").parts
        if algo not in ("sb2", "_atari"):
            pairs.append((algo, "/".join(env)))
    return pairs


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) or {}
    data.pop("defaults", None)
    return data


@cache
def _zoo_file(algo: str) -> dict[str, Any]:
    return yaml.safe_load((ZOO / f"{algo}.yml").read_text())


def _composed(algo: str, env: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """cfg.algo and cfg.env as `python run.py algo=ALGO env=ENV` composes them (the Hydra defaults list,
    merged by hand: composing 121 configs costs half a minute; test_the_merge_is_hydras_composition)."""
    tuned = TUNED / algo / f"{env}.yaml"
    layers = [OmegaConf.structured(AlgoConfig), _yaml(CONF_DIR / "algo" / f"{algo}.yaml")]
    shared = _shared(tuned)
    layers += [_yaml(shared)] if shared is not None else []
    algo_cfg = OmegaConf.merge(*layers, _yaml(tuned))
    env_cfg = OmegaConf.merge(OmegaConf.structured(EnvConfig), _yaml(CONF_DIR / "env" / f"{env}.yaml"))
    return OmegaConf.to_container(algo_cfg), OmegaConf.to_container(env_cfg)  # type: ignore[return-value]


def overrides(path: Path) -> dict[str, str]:
    """The settings `path` marks as deliberately not rl-zoo3's, {dotted key: why}: a key line ending in
    `# not rl-zoo3: <why>` (under `hyperparams:`, `hyperparams.<key>`)."""
    marked: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        key, note = KEY_LINE.match(line), MARKER.search(line)
        if key is None:
            assert note is None, f"{path}:{number}: a `# not rl-zoo3:` marker belongs on the line of the key it marks"
            continue
        indent = len(key["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key["key"]))
        if note is not None:
            assert note["why"].strip(), f"{path}:{number}: `# not rl-zoo3:` says why after the colon"
            marked[".".join(k for _, k in stack)] = note["why"].strip()
    return marked


def _classes() -> dict[Any, str]:
    """rl-zoo3's policy_kwargs classes by the names quarl's tuned files give them."""
    from quarl.rl.algos import ACTIVATIONS, OPTIMIZERS

    return {cls: name for name, cls in {**ACTIVATIONS, **OPTIMIZERS}.items()}


def _literal(node: ast.AST) -> Any:
    """A Python literal as rl-zoo3 writes one in a string ("dict(net_arch=[64, 64], activation_fn=nn.ReLU)"),
    read without running it; a class becomes quarl's name for it (or its own, which quarl does not know)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, (ast.Attribute, ast.Name)):
        import torch.nn as nn
        from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

        names = {"nn": nn, "RMSpropTFLike": RMSpropTFLike}
        dotted = ast.unparse(node)
        head, *rest = dotted.split(".")
        obj = names[head]
        for part in rest:
            obj = getattr(obj, part)
        return _classes().get(obj, dotted)
    raise ValueError(f"not a literal rl-zoo3 writes: {ast.unparse(node)}")


def _read(value: Any) -> Any:
    return _literal(ast.parse(value.strip(), mode="eval").body) if isinstance(value, str) else value


def rl_zoo3_settings(entry: dict[str, Any]) -> dict[str, Any]:
    """An rl-zoo3 entry as the settings quarl names them."""
    zoo = dict(entry)
    normalize = _read(zoo.pop("normalize", False))
    noise = zoo.pop("noise_type", None)
    wrapper = zoo.pop("env_wrapper", None)
    out = {
        "n_timesteps": zoo.pop("n_timesteps"),
        "policy": zoo.pop("policy"),
        "n_envs": zoo.pop("n_envs", 1),
        "normalize": bool(normalize),
        "noise_type": noise.strip().replace("-", "_") if noise else None,
        "env.frame_stack": zoo.pop("frame_stack", 1),
        "env.env_wrapper": [wrapper] if isinstance(wrapper, str) else wrapper,
    }
    if normalize:
        out["normalize_kwargs"] = normalize if isinstance(normalize, dict) else {}
    if noise:
        out["noise_std"] = zoo.pop("noise_std")
    zoo.pop("noise_std", None)
    if "policy_kwargs" in zoo:
        zoo["policy_kwargs"] = _read(zoo["policy_kwargs"])
    return out | {f"hyperparams.{k}": v for k, v in zoo.items()}


def quarl_settings(algo: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """quarl's composed algo and env configs as the settings an rl-zoo3 entry holds."""
    out = {k: algo[k] for k in ("n_timesteps", "policy", "n_envs", "normalize", "noise_type")}
    out["env.frame_stack"] = env["frame_stack"]
    out["env.env_wrapper"] = ATARI_WRAPPER if env["suite"] == "atari" else None
    if algo["normalize"]:
        out["normalize_kwargs"] = algo["normalize_kwargs"]
    if algo["noise_type"]:
        out["noise_std"] = algo["noise_std"]
    return out | {f"hyperparams.{k}": v for k, v in algo["hyperparams"].items()}


def _canonical(value: Any) -> Any:
    """`value` in a form where equal settings compare equal: 1e6 and 1000000, lin_7e-4 and lin_0.0007."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, bool) or value is None:
        return ("bool", value)  # not 1 or 0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            return ("lin", float(value[4:]))
        except ValueError:
            return value
    return value


def _task(env: dict[str, Any]) -> str:
    """The rl-zoo3 entry's name for quarl's env, less its version: `atari` for every game (Gymnasium's
    BipedalWalkerHardcore is BipedalWalker with hardcore=True)."""
    if env["suite"] == "atari":
        return "atari"
    return env["id"].split("-v")[0] + ("Hardcore" if env["kwargs"].get("hardcore") else "")


def test_every_tuned_file_names_its_source():
    """Every file outside sb2/ copies rl-zoo3 (or includes a shared file that does); every shared file is
    included by some game; sb2/ holds the published agents' settings, which are not rl-zoo3's."""
    reached = {_shared(TUNED / algo / f"{env}.yaml") for algo, env in _pairs()} - {None}
    for path in _tuned_files():
        where = path.relative_to(TUNED).parts[0]
        if where == "sb2":
            assert _source(path) is None and "rl-baselines-zoo" in path.read_text(), path
            continue
        assert _source(path) is not None, f"{path}: its header names no rl-zoo3 entry (# rl-zoo3 hyperparams/...)"
        if where == "_atari":
            assert path in reached, f"{path}: no game includes it"


@pytest.mark.parametrize("algo, env", _pairs(), ids=[f"{a}/{e}" for a, e in _pairs()])
def test_tuned_values_are_rl_zoo3s(algo, env):
    tuned = TUNED / algo / f"{env}.yaml"
    source = _source(tuned)
    assert source is not None, f"{tuned}: its header names no rl-zoo3 entry"
    zoo_algo, env_id = source
    assert zoo_algo == algo, f"{tuned} copies rl-zoo3's {zoo_algo}.yml"
    entries = _zoo_file(zoo_algo)
    assert env_id in entries, f"{tuned}: rl-zoo3 {rl_zoo3.__version__}'s {zoo_algo}.yml has no entry {env_id}"
    algo_cfg, env_cfg = _composed(algo, env)
    assert env_id.split("-v")[0] == _task(env_cfg), f"{tuned} copies rl-zoo3's {env_id}; env={env} is {env_cfg['id']}"
    theirs, ours = rl_zoo3_settings(entries[env_id]), quarl_settings(algo_cfg, env_cfg)
    shared = _shared(tuned)
    marked = overrides(tuned) | (overrides(shared) if shared is not None else {})  # a shared file's markers apply
    problems = []
    for key in sorted(theirs.keys() | ours.keys() | marked.keys()):
        zoo_value, quarl_value = theirs.get(key, ABSENT), ours.get(key, ABSENT)
        same = _canonical(zoo_value) == _canonical(quarl_value)
        if not same and key not in marked:
            problems.append(f"{key}: rl-zoo3 {zoo_value!r}, quarl {quarl_value!r}")
        elif same and key in marked:
            problems.append(f"{key}: marked `# not rl-zoo3`, and it is rl-zoo3's {zoo_value!r} (drop the marker)")
    assert not problems, (
        f"{tuned} against rl-zoo3 {rl_zoo3.__version__} hyperparams/{zoo_algo}.yml, {env_id} (a deliberate "
        "difference is written in the file with `# not rl-zoo3: <why>` on its line):\n  " + "\n  ".join(problems)
    )


@pytest.mark.parametrize("algo, env", [("ppo", "mujoco/ant"), ("dqn", "atari/pong"), ("sac", "bullet/humanoid")])
def test_the_merge_is_hydras_composition(algo, env):
    """What the comparison reads is what Hydra composes: an algorithm default the tuned file leaves as it is,
    a game that includes the shared Atari file, VecNormalize's arguments."""
    cfg = compose_cfg(f"algo={algo}", f"env={env}")
    assert _composed(algo, env) == (OmegaConf.to_container(cfg.algo), OmegaConf.to_container(cfg.env))


def test_markers_and_literals_are_read(tmp_path):
    path = tmp_path / "probe.yaml"
    path.write_text("n_envs: 8  # not rl-zoo3 (1): why\nhyperparams:\n  gamma: 0.9  # not rl-zoo3: because\n  tau: 1\n")
    assert overrides(path) == {"n_envs": "why", "hyperparams.gamma": "because"}
    path.write_text("hyperparams:\n  # not rl-zoo3: a marker on a line of its own\n  gamma: 0.9\n")
    with pytest.raises(AssertionError, match="belongs on the line"):
        overrides(path)
    kwargs = _read("dict(log_std_init=-2, activation_fn=nn.ReLU, net_arch=dict(pi=[256], vf=[256]), )")
    assert kwargs == {"log_std_init": -2, "activation_fn": "relu", "net_arch": {"pi": [256], "vf": [256]}}
    assert _read("dict(optimizer_class=RMSpropTFLike)") == {"optimizer_class": "rmsprop_tf_like"}
    assert _read("dict(activation_fn=nn.Mish)") == {"activation_fn": "nn.Mish"}  # not quarl's: differs
    assert _canonical("lin_7e-4") == _canonical("lin_0.0007") and _canonical(True) != _canonical(1)
