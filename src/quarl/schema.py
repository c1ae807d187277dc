"""Typed schemas for every config group, registered in Hydra's ConfigStore.

Each YAML file of a group lists its schema first in its defaults list, so Hydra rejects unknown
keys and wrong types at composition time. `check` adds the rules a type cannot express.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from quarl.errors import QuarlError

QUANT_METHODS = ("fp32", "fp16", "bf16", "ptq", "qat", "actorq")
SCHEMES = ("affine", "symmetric", "quarl_code", "published")
GRANULARITIES = ("per_tensor", "per_channel")
NOISE_TYPES = (None, "normal", "ornstein_uhlenbeck")
# "fake": quantize-dequantize only; the rest execute the policy for real (quarl.deploy.CHOICES).
EXEC_BACKENDS = ("fake", "auto", "torch", "onnx", "onnx_int8", "onnx_int4", "onnx_int2", "torch_fp16", "torch_bf16")
DEVICES = ("cpu", "cuda", "auto")
POLICY_SOURCES = ("train", "path", "hub")
ACTORQ_BACKENDS = ("local", "ray")


@dataclass
class AlgoConfig:
    """An SB3 algorithm and its hyperparameters (rl-zoo3 layout)."""

    name: str = MISSING
    policy: str = "MlpPolicy"
    n_timesteps: int = 100_000
    n_envs: int = 1
    normalize: bool = False
    normalize_kwargs: dict[str, Any] = field(default_factory=dict)
    noise_type: Optional[str] = None
    noise_std: float = 0.1
    hyperparams: dict[str, Any] = field(default_factory=dict)


@dataclass
class EnvConfig:
    """A Gymnasium environment: quarl's short name and the registered id."""

    name: str = MISSING
    id: str = MISSING
    suite: str = "classic"  # classic, box2d, atari, bullet, mujoco or dmc (quarl.envs.SUITES)
    frame_stack: int = 1  # observations stacked along the first axis (Atari: 4)
    # The size of the episode returns that matter here (about solved minus random): E is n/a when
    # |R_fp32| is within 2% of it (null: only when R_fp32 is exactly 0)
    return_scale: Optional[float] = None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class QuantConfig:
    """How the policy's weights are quantized."""

    method: str = "ptq"
    bits: int = 8
    scheme: str = "affine"
    granularity: str = "per_tensor"
    quantize_bias: bool = False
    act_bits: int = 8  # QAT: bits of each layer's input activation; PTQ: of every layer's input but the first (32: not quantized)
    delay: Optional[int] = None  # QAT: env steps before fake quant is on (None: half the budget)
    freeze_after: Optional[int] = None  # QAT: env step at which ranges stop moving (None: end of training)
    backend: str = "fake"  # also execute the quantized policy for real: auto or one of quarl.deploy.CHOICES
    actor_bits: int = 8  # ActorQ: precision the actors execute the policy in (8: int8, 16: fp16, 32: fp32)
    input_bits: int = 32  # PTQ: bits of the observation entering the network, after normalisation (32: not quantized)
    calibration: str = "minmax"  # PTQ activations/inputs: static ranges from the min/max (minmax) or percentile of calibration rollouts
    calibration_episodes: int = 5  # PTQ: fp32 episodes (seeds disjoint from the evaluation's) the ranges come from
    layer_bits: Any = None  # PTQ: weight bits of named inference layers (null: every layer at bits)


@dataclass
class PolicyConfig:
    """Where the fp32 policy comes from: trained by quarl, or a pretrained SB3 / rl-zoo3 model."""

    source: str = "train"  # train, path (an rl-zoo3 folder or a model zip) or hub (a model-hub repo id)
    path: Optional[str] = None  # policy.source=path
    repo: Optional[str] = None  # policy.source=hub, e.g. sb3/ppo-CartPole-v1


@dataclass
class ActorQConfig:
    """ActorQ: an fp32 learner and `actors` processes acting with a quantized copy of its policy.

    `null` values are derived from the algorithm (quarl.actorq.settings)."""

    actors: int = 4
    backend: str = "local"  # local (torch.multiprocessing, no server) or ray
    update_period: int = 100  # actor env steps between weight pulls
    comm_bits: Optional[int] = None  # precision of the weights on the wire: 8, 16 or 32 (null: quant.actor_bits)
    publish_period: int = 10  # learner updates between publishes of the weights
    chunk_size: int = 64  # transitions per chunk an actor sends
    samples_per_insert: Optional[float] = None  # null: DQN batch*gradient_steps/train_freq; D4PG its hyperparam
    min_replay: Optional[int] = None  # transitions before learning starts (null: algo learning_starts)
    replay_size: Optional[int] = None  # replay capacity (null: algo buffer_size)
    n_step: Optional[int] = None  # n-step returns (null: D4PG its hyperparam, DQN 3)
    max_restarts: int = 3  # restarts per actor id before the run goes on without it
    ray_address: Optional[str] = None  # backend=ray: a cluster's address (null: start Ray locally)
    log_interval_s: float = 10.0  # seconds between progress lines
    stall_timeout_s: float = 120.0  # no experience for this long ends the run with an error
    stop_at_return: Optional[float] = None  # end once the last 10 training episodes average this (null: whole budget)


@dataclass
class TrackingConfig:
    """Trackers a training's curve also goes to (its CSV and TensorBoard files are always written)."""

    wandb: bool = False  # a W&B run (package wandb)
    wandb_mode: str = "offline"  # offline (no network; `wandb sync` later), online or disabled
    wandb_dir: str = "outputs"  # W&B writes wandb/offline-run-* here (relative: the launch dir)
    mlflow: bool = False  # an MLflow run (package mlflow or mlflow-skinny)
    mlflow_uri: str = "outputs/mlflow.db"  # a file path (a local SQLite store) or an MLflow tracking URI
    project: str = "quarl"  # W&B project / MLflow experiment
    group: Optional[str] = None  # run group; None: the named sweep (+sweep=NAME) or the multirun folder


@dataclass
class TrainConfig:
    steps: Optional[int] = None
    device: str = "cpu"
    threads: Optional[int] = None  # torch threads of a cell; None: the launcher's allotment (SLURM), else 1
    progress: bool = True
    checkpoint_every: Optional[int] = None  # env steps; None: a tenth of the budget; 0: no checkpoints
    log_interval_s: float = 30.0  # seconds between progress lines when stderr is not a terminal; 0: none
    keep_best: bool = False  # evaluate during training and keep the best model (rl-zoo3's EvalCallback)
    eval_every: Optional[int] = None  # keep_best: env steps between evaluations; None: a twentieth of the budget
    eval_episodes: int = 10  # keep_best: episodes per evaluation (seeds disjoint from the study's)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


@dataclass
class EvalConfig:
    episodes: int = 10
    n_envs: int = 4
    deterministic: bool = True
    progress: bool = True


@dataclass
class StoreConfig:
    path: str = "outputs/results.sqlite"
    policies: str = "outputs/policies"


@dataclass
class RunConfig:
    """One cell of a study."""

    algo: AlgoConfig = MISSING
    env: EnvConfig = MISSING
    quant: QuantConfig = MISSING
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    actorq: ActorQConfig = field(default_factory=ActorQConfig)
    seed: int = 0
    force: bool = False
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    store: StoreConfig = field(default_factory=StoreConfig)


def register() -> None:
    """Put the schemas in Hydra's ConfigStore (the YAML files name them in their defaults)."""
    cs = ConfigStore.instance()
    cs.store(group="schema", name="config", node=RunConfig)
    cs.store(group="schema", name="algo", node=AlgoConfig)
    cs.store(group="schema", name="env", node=EnvConfig)
    cs.store(group="schema", name="quant", node=QuantConfig)


def _one_of(field_name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        shown = ", ".join(str(a) for a in allowed if a is not None)
        raise QuarlError(f"{field_name}={value} is not allowed: choose one of {shown}.")


def _check_qat(cfg: Any) -> None:
    q = cfg.quant
    if not 2 <= q.bits <= 16:
        raise QuarlError(f"quant.bits={q.bits} is out of range for quant=qat: use 2..16.")
    if not (2 <= q.act_bits <= 16 or q.act_bits == 32):
        raise QuarlError(f"quant.act_bits={q.act_bits} is out of range: use 2..16, or 32 for fp32 activations.")
    if q.delay is not None and q.delay < 0:
        raise QuarlError(f"quant.delay={q.delay} must be a number of env steps >= 0 (or null for half the budget).")
    if q.freeze_after is not None and q.freeze_after < (q.delay or 0):
        raise QuarlError(
            f"quant.freeze_after={q.freeze_after} comes before quant.delay={q.delay}: ranges must be "
            "observed with fake quant on before they freeze; use a step >= quant.delay, or null."
        )


CALIBRATIONS = ("minmax", "percentile")


def _check_ptq(cfg: Any) -> None:
    q = cfg.quant
    for name in ("act_bits", "input_bits"):
        if not (2 <= q[name] <= 16 or q[name] == 32):
            raise QuarlError(f"quant.{name}={q[name]} is out of range: use 2..16, or 32 for unquantized "
                             f"{'activations' if name == 'act_bits' else 'inputs'}.")
    _one_of("quant.calibration", q.calibration, CALIBRATIONS)
    if q.calibration_episodes < 1:
        raise QuarlError(f"quant.calibration_episodes={q.calibration_episodes} must be a positive number of episodes "
                         "(the fp32 rollouts activation and input ranges are calibrated on).")
    if q.layer_bits is None:
        return
    if not isinstance(q.layer_bits, Mapping):
        raise QuarlError(f"quant.layer_bits={q.layer_bits} is not allowed: give {{LAYER:BITS,...}} (names from quarl "
                         "sensitivity, bits 2..16 or 32), or null for every layer at quant.bits.")
    for layer, bits in q.layer_bits.items():
        if not isinstance(bits, int) or isinstance(bits, bool) or not (2 <= bits <= 16 or bits == 32):
            raise QuarlError(f"quant.layer_bits.{layer}={bits} is out of range: use 2..16, or 32 for unchanged weights.")
        if q.backend == "onnx_int8" and bits > 8:
            raise QuarlError(f"quant.backend=onnx_int8 executes integer policies of at most 8 bits, not "
                             f"quant.layer_bits.{layer}={bits}: use layer bits <= 8, or quant.backend=auto.")
    if q.layer_bits:
        from quarl.layers import check_layer_names  # builds the policy network: only where layers are named

        check_layer_names(cfg)


def _check_actorq(cfg: Any) -> None:
    a = cfg.actorq
    if cfg.algo.name not in ("dqn", "d4pg"):
        raise QuarlError(f"quant=actorq trains algo=dqn (discrete actions) or algo=d4pg (continuous), not algo={cfg.algo.name}.")
    if a.actors < 1:
        raise QuarlError(f"actorq.actors={a.actors} must be at least 1 actor process.")
    _one_of("actorq.backend", a.backend, ACTORQ_BACKENDS)
    if cfg.quant.actor_bits not in (8, 16, 32):
        raise QuarlError(
            f"quant.actor_bits={cfg.quant.actor_bits} cannot be executed by an actor: use 8 (int8), 16 (fp16) or 32 (fp32)."
        )
    if a.comm_bits not in (None, 8, 16, 32):
        raise QuarlError(f"actorq.comm_bits={a.comm_bits} is not allowed: weights travel at 8, 16 or 32 bits "
                         "(or null: at quant.actor_bits).")
    positive = {"update_period": a.update_period, "publish_period": a.publish_period, "chunk_size": a.chunk_size,
                "n_step": a.n_step, "replay_size": a.replay_size, "samples_per_insert": a.samples_per_insert,
                "log_interval_s": a.log_interval_s, "stall_timeout_s": a.stall_timeout_s}
    for name, value in positive.items():
        if value is not None and value <= 0:
            raise QuarlError(f"actorq.{name}={value} must be positive" + (" (or null)." if name in (
                "n_step", "replay_size", "samples_per_insert") else "."))
    for name in ("min_replay", "max_restarts"):
        if a[name] is not None and a[name] < 0:
            raise QuarlError(f"actorq.{name}={a[name]} must be >= 0.")


def _check_policy(cfg: Any) -> None:
    p = cfg.policy
    _one_of("policy.source", p.source, POLICY_SOURCES)
    if p.source == "path" and not p.path:
        raise QuarlError("policy.source=path needs policy.path: an rl-zoo3 log folder or an SB3 model zip.")
    if p.source == "hub" and not p.repo:
        raise QuarlError("policy.source=hub needs policy.repo: a model-hub repo id such as sb3/ppo-CartPole-v1.")
    if p.source != "train" and cfg.quant.method in ("qat", "actorq"):
        raise QuarlError(
            f"quant={cfg.quant.method} trains its own policy: use policy.source=train, or quant=ptq/fp16/bf16 "
            f"to quantize the pretrained policy from policy.source={p.source}."
        )


def _check_train(cfg: Any) -> None:
    t = cfg.train
    if t.get("threads") is not None and t.threads < 1:
        raise QuarlError(f"train.threads={t.threads} must be at least 1 (or null: what the launcher allots, else 1).")
    if t.log_interval_s < 0:
        raise QuarlError(f"train.log_interval_s={t.log_interval_s} must be >= 0 seconds (0: no progress lines).")
    if t.eval_every is not None and t.eval_every < 1:
        raise QuarlError(f"train.eval_every={t.eval_every} must be a positive number of env steps (or null).")
    if t.eval_episodes < 1:
        raise QuarlError(f"train.eval_episodes={t.eval_episodes} must be a positive number of episodes.")
    if t.keep_best and cfg.quant.method == "actorq":
        raise QuarlError("train.keep_best=true applies to SB3 and QAT trainings; quant=actorq records its final "
                         "learner: use train.keep_best=false with quant=actorq.")
    _one_of("train.tracking.wandb_mode", t.tracking.wandb_mode, ("offline", "online", "disabled"))
    from quarl.tracking import require  # the tracker packages are optional

    require(t.tracking)


def check(cfg: Any) -> None:
    """Reject values that are well-typed but meaningless, naming the field and what is allowed."""
    if cfg.seed < 0:
        raise QuarlError(f"seed={cfg.seed} must be an integer >= 0 (Gymnasium seeds environments with it).")
    q = cfg.quant
    _one_of("quant.method", q.method, QUANT_METHODS)
    if q.method == "ptq" and not (2 <= q.bits <= 16 or q.bits == 32):
        raise QuarlError(
            f"quant.bits={q.bits} is out of range: use 2..16, or 32 for unchanged weights "
            "(quant=fp16 / quant=bf16 for half precision)."
        )
    if q.method == "ptq":
        _check_ptq(cfg)
    if q.method == "qat":
        _check_qat(cfg)
    if q.method == "actorq":
        _check_actorq(cfg)
    elif cfg.algo.name == "d4pg":
        raise QuarlError(f"algo=d4pg is trained by ActorQ only: use quant=actorq (not quant={q.method}).")
    _check_policy(cfg)
    _one_of("quant.backend", q.backend, EXEC_BACKENDS)
    nbits = {"onnx_int4": 4, "onnx_int2": 2}.get(q.backend)
    if nbits is not None and not (q.method in ("ptq", "qat") and q.bits <= nbits):
        raise QuarlError(
            f"quant.backend={q.backend} executes policies with at most {nbits}-bit weights, not quant={q.method} "
            f"with quant.bits={q.bits}: use quant.bits<={nbits}, or quant.backend=onnx_int8/auto."
        )
    if q.backend == "onnx_int8" and not (q.method in ("ptq", "qat") and q.bits <= 8):
        raise QuarlError(
            f"quant.backend=onnx_int8 executes integer policies of at most 8 bits, not quant={q.method} "
            f"with quant.bits={q.bits}: use quant.backend=auto, or quant=ptq with quant.bits<=8."
        )
    if q.method in ("ptq", "qat"):
        if q.scheme == "paper":
            raise QuarlError(
                "quant.scheme=paper is ambiguous and no longer accepted: use quant.scheme=quarl_code (the formula "
                "of QuaRL's released code, which quarl called paper before) or quant.scheme=published (the "
                "formula printed in the paper)."
            )
        _one_of("quant.scheme", q.scheme, SCHEMES)
        _one_of("quant.granularity", q.granularity, GRANULARITIES)
        if q.scheme in ("quarl_code", "published") and q.granularity != "per_tensor":
            raise QuarlError(
                f"quant.scheme={q.scheme} is one of QuaRL's per-tensor formulas: use quant.granularity=per_tensor, "
                "or quant.scheme=affine/symmetric for per_channel."
            )
    if cfg.eval.episodes < 1:
        raise QuarlError(f"eval.episodes={cfg.eval.episodes} must be a positive number of episodes.")
    if cfg.eval.n_envs < 1:
        raise QuarlError(f"eval.n_envs={cfg.eval.n_envs} must be at least 1.")
    if cfg.train.steps is not None and cfg.train.steps < 1:
        raise QuarlError(f"train.steps={cfg.train.steps} must be a positive number of env steps (or null).")
    _one_of("train.device", cfg.train.device, DEVICES)
    if cfg.train.checkpoint_every is not None and cfg.train.checkpoint_every < 0:
        raise QuarlError(
            f"train.checkpoint_every={cfg.train.checkpoint_every} must be >= 0 (0: no checkpoints; null: every tenth)."
        )
    _check_train(cfg)
    if cfg.algo.n_envs < 1:
        raise QuarlError(f"algo.n_envs={cfg.algo.n_envs} must be at least 1.")
    _one_of("algo.noise_type", cfg.algo.noise_type, NOISE_TYPES)
