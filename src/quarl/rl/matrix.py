"""Which algorithm runs on which environment: the compatibility matrix `quarl matrix` prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from quarl import CONF_DIR
from quarl.config import method_registry, schema
from quarl.errors import IncompatibleCell, QuarlError
from quarl.rl.algos import ALGOS, check_action_kind
from quarl.rl.envs import SUITES, action_kind

if TYPE_CHECKING:
    import pandas as pd

LEGEND = {
    "tuned": "rl-zoo3's tuned hyperparameters (src/quarl/conf/tuned/<algo>/<env>.yaml)",
    "default": "runs with the algorithm's default hyperparameters",
    "actorq": "trained by quant=actorq only",
    "n/a": "the algorithm cannot act in this action space",
    "needs [x]": "the suite's packages are missing: pip install 'quarl[x]' (from a checkout: pip install -e '.[x]')",
}


def env_choices(conf_dir: Path) -> list[str]:
    """Every `env=` choice, e.g. 'cartpole', 'atari/breakout'."""
    root = conf_dir / "env"
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))


def env_config(conf_dir: Path, choice: str):
    """The env config `env=<choice>` selects (its YAML over the schema's defaults)."""
    raw = OmegaConf.load(conf_dir / "env" / f"{choice}.yaml")
    assert isinstance(raw, DictConfig)  # an env config is a mapping
    raw.pop("defaults", None)
    return OmegaConf.merge(OmegaConf.structured(schema.EnvConfig), raw)


def _cell(conf_dir: Path, algo: str, choice: str, kind: str) -> str:
    if kind not in ALGOS[algo].action_kinds:
        return "n/a"
    if ALGOS[algo].cls is None:  # no SB3 learner: trained only by a method's own (ActorQ's D4PG)
        return "+".join(method_registry.trained_only_by(algo))
    cell = "tuned" if (conf_dir / "tuned" / algo / f"{choice}.yaml").exists() else "default"
    return cell + "".join(f"+{name}" for name in _own_learners(algo))


def _own_learners(algo: str) -> list[str]:
    """Methods that also train `algo` with learners of their own (ActorQ's DQN)."""
    return [name for name, m in method_registry.registry().items() if m.trains_policy and m.algos and algo in m.algos]


DEFAULT_ZOO = "rl_zoo3"  # its hyperparameters fall back to the algorithm's defaults where it has none


def zoo_pairs(zoo: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The 'algo/env' pairs zoo `zoo` has hyperparameters for (conf/tuned/<zoo>/<algo>/<env>.yaml)."""
    root = conf_dir / "tuned" / zoo
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))


def check_runnable(cfg: DictConfig) -> None:
    """Raise IncompatibleCell (the paper's n/a: a sweep records it as skipped) where the cell's
    algorithm cannot act in its env's action space, or its zoo has no hyperparameters for the pair."""
    kind = action_kind(cfg.env)
    check_zoo(cfg)
    check_action_kind(cfg.algo.name, cfg.env.id, kind, cfg.quant.method)


def check_zoo(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> None:
    """A zoo other than rl-zoo3 trains only the pairs it has hyperparameters for: the rest are n/a
    (IncompatibleCell: a sweep records them as skipped), never silently the algorithm's defaults."""
    zoo = cfg.get("zoo", DEFAULT_ZOO)
    if zoo == DEFAULT_ZOO:
        return
    pairs = zoo_pairs(zoo, conf_dir)
    if f"{cfg.algo.name}/{cfg.env.name}" not in pairs:
        raise IncompatibleCell(
            f"zoo={zoo} has hyperparameters for {', '.join(pairs)} only, not {cfg.algo.name}/{cfg.env.name} "
            "(n/a: use the default zoo=rl_zoo3 for it)."
        )


def applies(conf_dir: Path, algo: str, choice: str) -> bool:
    """Whether `algo` can act in the env `env=<choice>` selects (not the paper's n/a)."""
    return action_kind(env_config(conf_dir, choice)) in ALGOS[algo].action_kinds


def matrix(conf_dir: Path, suite: str | None = None) -> pd.DataFrame:
    """One row per env choice (with its suite and action kind), one column per algorithm."""
    import pandas as pd  # not at import: every run imports this module to check its cell

    if suite is not None and suite not in SUITES:
        raise QuarlError(f"--suite={suite} is not known: choose one of {', '.join(SUITES)}.")
    rows = []
    for choice in env_choices(conf_dir):
        env = env_config(conf_dir, choice)
        if suite is not None and env.suite != suite:
            continue
        kind: str
        try:
            kind = action_kind(env)
            cells = {algo: _cell(conf_dir, algo, choice, kind) for algo in ALGOS}
        except QuarlError:  # the suite's packages are not installed
            kind, cells = "?", {algo: f"needs [{SUITES[env.suite].extra}]" for algo in ALGOS}
        rows.append({"env": choice, "suite": env.suite, "actions": kind, **cells})
    return pd.DataFrame(rows)
