"""Training curves: every training quarl runs writes its curve to a folder beside its policy.

Layout of a curve folder (`<policy folder>/curves/` for SB3 and QAT trainings, `<run dir>/curves/`
for ActorQ runs):

    episodes.csv            one row per training episode: step, wall_s, reward, length (ActorQ: actor)
    scalars.csv             one row per logged step: step, wall_s, then one column per scalar the
                            algorithm logs (train/loss, train/value_loss, rollout/ep_rew_mean,
                            time/fps, eval/mean_reward, ...)
    events.out.tfevents.*   with `train.tracking.tensorboard=true`, TensorBoard: episode/return and
                            episode/length at the step each training episode ended, and every scalar
                            of scalars.csv (`tensorboard --logdir`)

With `train.tracking.wandb=true` the same points also go to a W&B run (offline by default, under
`train.tracking.wandb_dir`), and with `train.tracking.mlflow=true` to an MLflow run (a local SQLite
store by default); runs are named by the policy they train and grouped by the sweep.

A resumed training (from a checkpoint at step S) drops the points at or after S from the CSVs and
hides them in TensorBoard (`purge_step`), so the curve continues where the checkpoint left it.
"""

from __future__ import annotations

import csv
import logging
import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Protocol

from stable_baselines3.common.logger import KVWriter

from quarl.config.schema import check_trackers
from quarl.errors import QuarlError
from quarl.store.disk import disk_full

log = logging.getLogger(__name__)

CURVES_DIR = "curves"
EPISODES_CSV, SCALARS_CSV = "episodes.csv", "scalars.csv"


@dataclass
class RunName:
    """How a training is named and grouped in trackers."""

    name: str  # the trained policy, e.g. ppo-cartpole-seed0 (QAT: ...-qat4)
    group: Optional[str]  # the sweep (+sweep=NAME, else the multirun folder); None for a single run
    tags: dict[str, str] = field(default_factory=dict)  # algo, env, quant, seed, policy key
    config: dict[str, Any] = field(default_factory=dict)  # the run's config (hyperparameters)


class Writer(Protocol):
    """One destination of a curve."""

    def episode(self, step: int, row: dict[str, Any]) -> None: ...

    def scalars(self, step: int, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class CsvTable:
    """A CSV file of rows with a `step` column; a key not seen before widens the header (the file is
    rewritten), and a resumed table keeps only its rows before `resume_step`."""

    def __init__(self, path: Path, resume_step: Optional[int] = None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.header: list[str] = []
        if resume_step is not None and path.exists():
            with path.open(newline="") as f:
                reader = csv.DictReader(f)
                self.header = list(reader.fieldnames or [])
                self.rows = [r for r in reader if float(r["step"]) < resume_step]
        self._rewrite()

    def append(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if any(k not in self.header for k in row):
            self.header += [k for k in row if k not in self.header]
            self._rewrite()
            return
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, self.header).writerow(row)

    def _rewrite(self) -> None:
        with self.path.open("w", newline="") as f:
            if self.header:
                writer = csv.DictWriter(f, self.header)
                writer.writeheader()
                writer.writerows(self.rows)


class CsvWriter:
    """episodes.csv and scalars.csv."""

    def __init__(self, folder: Path, resume_step: Optional[int]) -> None:
        self.episodes = CsvTable(folder / EPISODES_CSV, resume_step)
        self.table = CsvTable(folder / SCALARS_CSV, resume_step)

    def episode(self, step: int, row: dict[str, Any]) -> None:
        self.episodes.append({"step": step, **row})

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.table.append({"step": step, **values})

    def close(self) -> None:
        pass


class TensorBoardWriter:
    """TensorBoard event files in the curve folder."""

    def __init__(self, folder: Path, resume_step: Optional[int]) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        self.writer = SummaryWriter(log_dir=str(folder), purge_step=resume_step, flush_secs=30)

    def episode(self, step: int, row: dict[str, Any]) -> None:
        self.writer.add_scalar("episode/return", row["reward"], step)
        self.writer.add_scalar("episode/length", row["length"], step)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbWriter:
    """A W&B run (offline mode by default: `wandb sync` uploads it later)."""

    def __init__(self, run: RunName, settings: Any, base: Path) -> None:
        import wandb

        folder = _resolve(settings.wandb_dir, base)
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=settings.project,
            group=run.group,
            name=run.name,
            job_type=run.tags.get("quant"),
            tags=[f"{k}={v}" for k, v in run.tags.items()],
            config=run.config,
            dir=str(folder),
            mode=settings.wandb_mode,
            reinit="create_new",
        )
        self.run.define_metric("env_step")
        self.run.define_metric("*", step_metric="env_step")
        log.info("W&B run %s (%s mode) in %s", self.run.id, settings.wandb_mode, folder)

    def episode(self, step: int, row: dict[str, Any]) -> None:
        self.run.log({"env_step": step, "episode/return": row["reward"], "episode/length": row["length"]})

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log({"env_step": step, **values})

    def close(self) -> None:
        self.run.finish()


class MlflowWriter:
    """An MLflow run in `train.tracking.mlflow_uri` (a local SQLite store by default); metrics are
    sent in batches."""

    BATCH = 500

    def __init__(self, run: RunName, settings: Any, base: Path) -> None:
        from mlflow.tracking import MlflowClient

        uri = settings.mlflow_uri
        if "://" not in uri:  # a file path: a local SQLite store (MLflow 3's file store is retired)
            path = _resolve(uri, base)
            path.parent.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{path}"
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(settings.project)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(settings.project)
        tags = {**run.tags, **({"group": run.group} if run.group else {}), "mlflow.runName": run.name}
        self.run_id = self.client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
        params = _flat(run.config)
        from mlflow.entities import Param

        for start in range(0, len(params), 100):
            self.client.log_batch(
                self.run_id, params=[Param(k, str(v)[:6000]) for k, v in list(params.items())[start : start + 100]]
            )
        self.pending: list[Any] = []
        log.info("MLflow run %s in %s", self.run_id, uri)

    def _add(self, step: int, values: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.pending += [Metric(k, float(v), now, step) for k, v in values.items()]
        if len(self.pending) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        for start in range(0, len(self.pending), 1000):
            self.client.log_batch(self.run_id, metrics=self.pending[start : start + 1000])
        self.pending = []

    def episode(self, step: int, row: dict[str, Any]) -> None:
        self._add(step, {"episode/return": row["reward"], "episode/length": row["length"]})

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self._add(step, values)

    def close(self) -> None:
        self._flush()
        self.client.set_terminated(self.run_id)


class Curves:
    """Every destination of one training's curve; `episode` and `scalars` write to each of them."""

    def __init__(self, folder: Path, writers: list[Writer]) -> None:
        self.folder, self.writers = folder, writers

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write to the curve's files; a full disk is a QuarlError that says so (the training's
        last checkpoint is kept, so the same command resumes it)."""
        try:
            yield
        except OSError as exc:
            if not disk_full(exc, self.folder):
                raise
            raise QuarlError(
                f"The disk is full: the training curve in {self.folder} could not be written ({exc}). Free space "
                "there and run the same command again: the training resumes from its last checkpoint."
            ) from None

    def episode(self, step: int, reward: float, length: int, wall_s: float, **extra: Any) -> None:
        row = {"wall_s": round(wall_s, 3), "reward": float(reward), "length": int(length), **extra}
        with self._writing():
            for writer in self.writers:
                writer.episode(int(step), row)

    def scalars(self, step: int, values: dict[str, Any], wall_s: Optional[float] = None) -> None:
        numeric = {
            k: float(v)
            for k, v in values.items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))
        }
        if wall_s is not None:
            numeric = {"wall_s": round(wall_s, 3), **numeric}
        if numeric:
            with self._writing():
                for writer in self.writers:
                    writer.scalars(int(step), numeric)

    def close(self) -> None:
        for writer in self.writers:
            try:
                writer.close()
            except Exception as exc:  # a tracker that fails to close must not lose the policy
                log.warning("Closing %s failed: %s", type(writer).__name__, exc)


class CurvesOutput(KVWriter):
    """An output format of SB3's logger: each dump of the logger becomes one `Curves.scalars` row."""

    def __init__(self, curves: Curves) -> None:
        self.curves = curves

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        wall = key_values.get("time/wall_s")
        self.curves.scalars(step, {k: v for k, v in key_values.items() if k != "time/wall_s"}, wall)

    def close(self) -> None:
        pass


def open_curves(folder: Path, settings: Any, run: RunName, base: Path, resume_step: Optional[int] = None) -> Curves:
    """The curve writers of one training: CSV in `folder`, plus TensorBoard, W&B and MLflow when
    `settings` (a `train.tracking` config) turns them on. Relative tracker paths are against `base`."""
    folder.mkdir(parents=True, exist_ok=True)
    check_trackers(settings)
    writers: list[Writer] = [CsvWriter(folder, resume_step)]
    if settings.tensorboard:
        writers.append(TensorBoardWriter(folder, resume_step))
    if settings.wandb:
        writers.append(WandbWriter(run, settings, base))
    if settings.mlflow:
        writers.append(MlflowWriter(run, settings, base))
    return Curves(folder, writers)


def sweep_group(explicit: Optional[str] = None) -> Optional[str]:
    """The group of a run: `explicit`, else the named sweep (+sweep=NAME), else the multirun's
    folder name (DATE/TIME), else None (a single run, or outside Hydra)."""
    if explicit:
        return explicit
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if not HydraConfig.initialized():
            return None
        hc = HydraConfig.get()
        if hc.runtime.choices.get("sweep"):
            return str(hc.runtime.choices["sweep"])
        if hc.mode == RunMode.MULTIRUN:
            return "/".join(Path(hc.sweep.dir).parts[-2:])
    except Exception as exc:  # Hydra's config without the keys read here
        log.debug("No sweep group: %s", exc)
    return None


def launch_dir() -> Path:
    """The folder the run was launched from (relative tracker paths are against it)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.cwd)
    except Exception as exc:  # Hydra's config without runtime.cwd
        log.debug("No Hydra launch dir: %s", exc)
    return Path.cwd()


def _resolve(value: str, base: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): obj}
