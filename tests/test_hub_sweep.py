"""The ptq_table_atari_hub sweep: every cell quantizes rl-zoo3's agent for its algo and game from the
model hub (planned, nothing downloaded), and one cell runs end to end on a hub repo faked at the
download call (the hub is never reached from tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hydra import initialize_config_dir

from quarl.app import CONF_DIR
from quarl.config import schema
from quarl.sweeps import Composer, expand, plan

pytest.importorskip("ale_py")  # the atari extra: planning opens each game to read its action space

SWEEP = "+sweep=ptq_table_atari_hub"
GAMES = {
    "atari/breakout": "Breakout",
    "atari/spaceinvaders": "SpaceInvaders",
    "atari/beamrider": "BeamRider",
    "atari/mspacman": "MsPacman",
    "atari/qbert": "Qbert",
    "atari/seaquest": "Seaquest",
    "atari/pong": "Pong",
}
# One short game: 1 episode of at most 400 frames (100 agent steps), one env.
TINY = [
    "eval.episodes=1",
    "eval.n_envs=1",
    "env.kwargs.max_episode_steps=400",
    "train.progress=false",
    "eval.progress=false",
]


def _configs(*args: str) -> list[Any]:
    """The composed config of every job `python run.py -m SWEEP ARGS` would launch."""
    schema.register()
    jobs = expand(CONF_DIR, [SWEEP, *args])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        composer = Composer(CONF_DIR)
        return [composer(job) for job in jobs]


def test_every_cell_quantizes_the_zoo_agent_of_its_algo_and_game(tmp_path: Path) -> None:
    cells = plan(CONF_DIR, [SWEEP], tmp_path / "results.sqlite")
    assert len(cells) == 3 * 7 * 2 and set(cells["state"]) == {"to run"}, cells[["algo", "env", "state", "why"]]
    assert set(cells["seed"]) == {0}
    configs = _configs()
    assert {(c.algo.name, c.env.name, c.quant.method) for c in configs} == {
        (algo, env, quant) for algo in ("a2c", "dqn", "ppo") for env in GAMES for quant in ("fp16", "ptq")
    }
    for cfg in configs:
        assert cfg.policy.source == "hub"
        assert cfg.policy.repo == f"sb3/{cfg.algo.name}-{GAMES[cfg.env.name]}NoFrameskip-v4"


def _zoo_repo(folder: Path, cfg: Any) -> Path:
    """A model-hub repo as rl-zoo3 pushes it: <algo>-<EnvId>.zip, config.yml, and files that are no model."""
    from stable_baselines3 import DQN

    from quarl.rl.envs import make_env

    env = make_env(cfg.env)
    try:
        model = DQN("CnnPolicy", env, buffer_size=10, learning_starts=0, seed=0, device="cpu")
    finally:
        env.close()
    folder.mkdir(parents=True)
    model.save(folder / f"dqn-{cfg.env.id}.zip")
    (folder / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n"
        "- - - env_wrapper\n    - stable_baselines3.common.atari_wrappers.AtariWrapper\n"
        "  - - frame_stack\n    - 4\n  - - policy\n    - CnnPolicy\n"
    )
    (folder / "train_eval_metrics.zip").write_bytes(b"not a model")
    (folder / "README.md").write_text("rl-zoo3 model card\n")
    return folder


def test_a_hub_cell_runs_end_to_end_on_the_downloaded_agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    huggingface_hub = pytest.importorskip("huggingface_hub")  # the hub extra
    from quarl.pipeline import Context, run_cell

    (cfg,) = _configs("algo=dqn", "env=atari/breakout", "quant=ptq", *TINY)
    repo = _zoo_repo(tmp_path / "hub-copy", cfg)
    asked: list[str] = []

    def fake_snapshot_download(repo_id: str, cache_dir: str) -> str:
        asked.append(repo_id)
        return str(repo)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    run_cell(Context(cfg=cfg, run_dir=tmp_path / "run", base_dir=tmp_path, multirun=False))
    assert asked == ["sb3/dqn-BreakoutNoFrameskip-v4"]
    with sqlite3.connect(tmp_path / "outputs" / "results.sqlite") as con:
        rows = con.execute("SELECT quant, status, trained, train_time_s, policy_key FROM runs").fetchall()
    assert sorted((quant, status, trained, time) for quant, status, trained, time, _ in rows) == [
        ("fp32", "done", 0, None),
        ("ptq", "done", 0, None),
    ]
    assert len({key for *_, key in rows}) == 1  # both quantize the one downloaded policy
