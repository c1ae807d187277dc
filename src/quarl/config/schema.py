"""Typed schemas for every config group, registered in Hydra's ConfigStore.

Each YAML file of a group lists its schema first in its defaults list, so Hydra rejects unknown
keys and wrong types at composition time. `check` adds the rules a type cannot express.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from quarl.config import backend_registry, method_registry
from quarl.config.hyperparams import check_hyperparams
from quarl.config.method_registry import one_of
from quarl.errors import QuarlError

NOISE_TYPES = (None, "normal", "ornstein_uhlenbeck")
DEVICES = ("cpu", "cuda", "auto")
POLICY_SOURCES = ("train", "path", "hub")
ROBUST = ("sam", "noise")  # quarl.rl.robust.TECHNIQUES (kept here: checking a config needs no torch)
MAX_SEED = 2**31 - 1  # numpy, SB3 and Gymnasium all take a 32-bit seed
MAX_INT = 2**63 - 1  # what the store (SQLite) holds


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
    suite: str = "classic"  # one of quarl.rl.envs.SUITES (classic, box2d, atari, bullet, mujoco, dmc, ...)
    frame_stack: int = 1  # observations stacked along the first axis (Atari: 4)
    # The size of the episode returns that matter here (about solved minus random): E is n/a when
    # |R_fp32| is within 2% of it (null: only when R_fp32 is exactly 0)
    return_scale: Optional[float] = None
    # A uniformly random policy's mean return, where known: a fp32 policy no better than it did not
    # learn, and its records are flagged (null: only Gymnasium's reward threshold is used)
    random_return: Optional[float] = None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class PolicyConfig:
    """Where the fp32 policy comes from: trained by quarl, or a pretrained SB3 / rl-zoo3 model."""

    source: str = "train"  # train, path (an rl-zoo3 folder or a model zip) or hub (a model-hub repo id)
    path: Optional[str] = None  # policy.source=path
    repo: Optional[str] = None  # policy.source=hub, e.g. sb3/ppo-CartPole-v1
    trust: bool = False  # let the policy's files run code when loaded (pickle, YAML tags): trusted sources only


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
    time_limit_s: Optional[float] = None  # end the run after this many seconds of wall time (null: no limit)
    pin_actors: bool = False  # local actors: each on a core of its own, the first cores left to the learner (Linux)
    cuda_graph: bool = False  # DQN on a CUDA learner: each update one CUDA graph launch (quarl.actorq.graphed)


@dataclass
class TrackingConfig:
    """Trackers a training's curve also goes to (its CSV files are always written)."""

    # TensorBoard event files beside the CSVs (`tensorboard --logdir`). Off by default, as in SB3 and
    # rl-zoo3: writing them took a quarter of a 10k-step A2C training's time here.
    tensorboard: bool = False
    wandb: bool = False  # a W&B run (package wandb)
    wandb_mode: str = "offline"  # offline (no network; `wandb sync` later), online or disabled
    wandb_dir: str = "outputs"  # W&B writes wandb/offline-run-* here (relative: the launch dir)
    mlflow: bool = False  # an MLflow run (package mlflow or mlflow-skinny)
    mlflow_uri: str = "outputs/mlflow.db"  # a file path (a local SQLite store) or an MLflow tracking URI
    project: str = "quarl"  # W&B project / MLflow experiment
    group: Optional[str] = None  # run group; None: the named sweep (+sweep=NAME) or the multirun folder


@dataclass
class TrainConfig:
    """How the policy is trained (its budget, device, threads, progress, checkpoints, keep-best)."""

    steps: Optional[int] = None  # training budget in env steps; None: the tuned budget (algo.n_timesteps)
    device: str = "cpu"  # torch device for training: cpu, cuda or auto
    threads: Optional[int] = None  # torch threads of a cell; None: the launcher's allotment (SLURM), else 1
    # each training env in a process of its own (SB3's SubprocVecEnv), not all in this one (DummyVecEnv):
    # the same trajectories and policy, faster where an env step is costly (Atari) and cores are free
    subproc_envs: bool = False
    progress: bool = True  # a progress bar on a terminal (progress lines off one)
    checkpoint_every: Optional[int] = None  # env steps; None: a tenth of the budget; 0: no checkpoints
    log_interval_s: float = 30.0  # seconds between progress lines when stderr is not a terminal; 0: none
    keep_best: bool = False  # evaluate during training and keep the best model (rl-zoo3's EvalCallback)
    eval_every: Optional[int] = None  # keep_best: env steps between evaluations; None: a twentieth of the budget
    eval_episodes: int = 10  # keep_best: episodes per evaluation (seeds disjoint from the study's)
    stop_at_return: Optional[float] = None  # end once the last 10 training episodes average this (null: whole budget)
    # training for quantization robustness (quarl.rl.robust): null, sam (sharpness-aware minimisation)
    # or noise (pseudo-quantization noise); the policy is then its own (part of its key)
    robust: Optional[str] = None
    robust_rho: float = 0.05  # robust=sam: the radius of the ascent step
    robust_bits: int = 4  # robust=noise: the noise is half a quantization step at this width
    # mixed-precision training (quarl.train.amp): the algorithm's updates run under torch.autocast in
    # bfloat16 (no loss scaling needed); acting, evaluation and the saved policy stay fp32
    amp: bool = False
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


@dataclass
class EvalConfig:
    """How a policy is evaluated."""

    episodes: int = 10  # evaluation episodes per policy
    n_envs: int = 4  # environments stepped side by side (results do not depend on it)
    # processes playing whole episodes (results do not depend on it); null: the cores the cell may use
    # for image observations (the env costs as much as the network), else 1
    workers: Optional[int] = None
    deterministic: bool = True  # greedy / mean actions
    progress: bool = True


@dataclass
class StoreConfig:
    """Where results and trained policies go (relative paths: against the launch dir)."""

    path: str = "outputs/results.sqlite"  # the results store
    policies: str = "outputs/policies"  # the trained policy cache


@dataclass
class SearchConfig:
    """hydra/sweeper=optuna's judging of a trial (read by the sweeper; no cell uses it). Null: the
    sweeper's own `hydra.sweeper.search` (default: reward_mean, one seed)."""

    objective: Any = None  # a numeric record field, -FIELD to negate it, or a list of them (a Pareto front)
    seeds: Optional[int] = None  # seeds per trial (seed, seed+1, ...): the trial's value is their mean


@dataclass
class RunConfig:
    """One cell of a study."""

    algo: AlgoConfig = MISSING
    env: EnvConfig = MISSING
    quant: Any = MISSING  # the method's own settings (quarl.methods): conf/quant/<method>.yaml
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    actorq: ActorQConfig = field(default_factory=ActorQConfig)
    # whose hyperparameters the policy trains with: rl_zoo3 (tuned, where they exist) or sb2 (the
    # published QuaRL agents'); chosen as a config group (zoo=sb2), recorded here
    zoo: str = "rl_zoo3"
    seed: int = 0  # seeds training, evaluation episodes and calibration (>= 0)
    force: bool = False  # re-run a cell whose record is already in the store
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    search: SearchConfig = field(default_factory=SearchConfig)


_registered: list[tuple[Any, ...]] = []  # the ConfigStore and methods last registered


def register() -> None:
    """Put the schemas in Hydra's ConfigStore (the YAML files name them in their defaults). Again only
    where the store or the methods changed: it costs a few milliseconds, and every composition calls it."""
    cs = ConfigStore.instance()
    key = (id(cs), *((name, id(method)) for name, method in method_registry.registry().items()))
    if key in _registered:
        return
    cs.store(group="schema", name="config", node=RunConfig)
    cs.store(group="schema", name="algo", node=AlgoConfig)
    cs.store(group="schema", name="env", node=EnvConfig)
    method_registry.register_schemas()
    _registered[:] = [key]


def _check_policy(cfg: Any, method: method_registry.QuantMethod) -> None:
    p = cfg.policy
    one_of("policy.source", p.source, POLICY_SOURCES)
    if p.source == "path" and not p.path:
        raise QuarlError("policy.source=path needs policy.path: an rl-zoo3 log folder or an SB3 model zip.")
    if p.source == "hub" and not p.repo:
        raise QuarlError("policy.source=hub needs policy.repo: a model-hub repo id such as sb3/ppo-CartPole-v1.")
    if p.source != "train" and cfg.train.get("robust"):
        raise QuarlError(
            f"train.robust={cfg.train.robust} shapes a training; policy.source={p.source} trains nothing: "
            "use policy.source=train, or train.robust=null."
        )
    if p.source != "train" and cfg.train.get("amp"):
        raise QuarlError(
            f"train.amp=true shapes a training; policy.source={p.source} trains nothing: "
            "use policy.source=train, or train.amp=false."
        )
    if p.source != "train" and cfg.train.get("stop_at_return") is not None:
        raise QuarlError(
            f"train.stop_at_return={cfg.train.stop_at_return} ends a training; policy.source={p.source} trains "
            "nothing: use policy.source=train, or train.stop_at_return=null."
        )
    if p.source != "train" and method.trains_policy:
        quantizers = "/".join(
            n
            for n in method_registry.NAMES
            if not method_registry.get(n).trains_policy and n != method_registry.BASELINE
        )
        raise QuarlError(
            f"quant={method.name} trains its own policy: use policy.source=train, or quant={quantizers} "
            f"to quantize the pretrained policy from policy.source={p.source}."
        )


def _check_algo(cfg: Any, method: method_registry.QuantMethod) -> None:
    """The algorithm exists and the method can train or quantize it, with hyperparameters in range."""
    if cfg.algo.n_envs < 1:
        raise QuarlError(f"algo.n_envs={cfg.algo.n_envs} must be at least 1.")
    check_hyperparams(cfg.algo.hyperparams)
    one_of("algo.noise_type", cfg.algo.noise_type, NOISE_TYPES)
    only = method_registry.trained_only_by(cfg.algo.name)
    if only and method.name not in only:
        raise QuarlError(
            f"algo={cfg.algo.name} is trained by {' or '.join(only)} only: use quant={only[0]} "
            f"(not quant={method.name})."
        )


def exec_backends() -> tuple[str, ...]:
    """quant.backend's choices: "fake" (quantize-dequantize only), "auto", or a backend that also
    executes the policy for real (quarl.config.backend_registry)."""
    return ("fake", *backend_registry.choices())


def _check_backend(q: Any, method: method_registry.QuantMethod) -> None:
    if q.backend in ("fake", "auto"):
        return
    one_of("quant.backend", q.backend, exec_backends())
    backend = backend_registry.get(q.backend)
    number_format = str(q.get("format") or "int")
    if backend.formats and not backend.accepts(method.integer, q.bits, number_format):
        formats = " or ".join(f"quant.format={f}" for f in backend.formats)
        raise QuarlError(
            f"quant.backend={q.backend} executes {formats} cells only, not quant={q.method} with "
            f"quant.format={number_format}: use quant=ptq quant.format={backend.formats[0]}, or quant.backend=fake."
        )
    if not backend.accepts(method.integer, q.bits, number_format):
        bits = backend.max_bits
        raise QuarlError(
            f"quant.backend={q.backend} executes integer policies of at most {bits}-bit weights, not "
            f"quant={q.method} with quant.bits={q.bits}: use quant=ptq or quant=qat with quant.bits<={bits}, "
            "or quant.backend=auto."
        )


#: The largest training budget: far beyond any study, and small enough that rounding it up to whole
#: rollouts (n_steps x n_envs) stays inside the 64-bit integers the store and SB3 count in.
MAX_STEPS = 10**12
IMAGE_SUITES = ("atari",)  # env suites whose observations are images (a CNN policy)


def cnn_policy(cfg: Any) -> bool:
    """Whether the config's policy is a CNN on image observations (an image suite, or CnnPolicy)."""
    return cfg.env.get("suite") in IMAGE_SUITES or str(cfg.algo.get("policy")) == "CnnPolicy"


def _check_network(cfg: Any) -> None:
    """A backend that cannot run the policy's network (a CNN on image observations) is refused with
    the config, before any training or calibration."""
    backend = cfg.quant.backend
    mlp_only = backend in backend_registry.registry() and backend_registry.get(backend).mlp_only
    if mlp_only and cnn_policy(cfg):
        others = [b.name for b in backend_registry.registry().values() if b.auto and not b.mlp_only][:1]
        raise QuarlError(
            f"quant.backend={backend} runs MLP policies only, and env={cfg.env.name} gives images to a CNN "
            f"policy: use quant.backend={'/'.join([*others, 'auto'])} (or fake) for CNN policies."
        )


def _check_train(cfg: Any) -> None:
    t = cfg.train
    if t.steps is not None and t.steps < 1:
        raise QuarlError(f"train.steps={t.steps} must be a positive number of env steps (or null).")
    if t.steps is not None and t.steps > MAX_STEPS:
        raise QuarlError(f"train.steps={t.steps} is out of range: use 1..{MAX_STEPS} env steps (10**12), or null.")
    one_of("train.device", t.device, DEVICES)
    if t.checkpoint_every is not None and t.checkpoint_every < 0:
        raise QuarlError(
            f"train.checkpoint_every={t.checkpoint_every} must be >= 0 (0: no checkpoints; null: every tenth)."
        )
    if t.get("threads") is not None and t.threads < 1:
        raise QuarlError(f"train.threads={t.threads} must be at least 1 (or null: what the launcher allots, else 1).")
    if t.log_interval_s < 0:
        raise QuarlError(f"train.log_interval_s={t.log_interval_s} must be >= 0 seconds (0: no progress lines).")
    if t.eval_every is not None and t.eval_every < 1:
        raise QuarlError(f"train.eval_every={t.eval_every} must be a positive number of env steps (or null).")
    if t.eval_episodes < 1:
        raise QuarlError(f"train.eval_episodes={t.eval_episodes} must be a positive number of episodes.")
    if t.get("stop_at_return") is not None and not math.isfinite(t.stop_at_return):
        raise QuarlError(
            f"train.stop_at_return={t.stop_at_return} must be a finite mean return to stop at "
            "(or null: the whole budget)."
        )
    one_of("train.robust", t.robust, (None, *ROBUST))
    if t.robust_rho <= 0:
        raise QuarlError(f"train.robust_rho={t.robust_rho} must be positive (SAM's radius; 0.05 is usual).")
    if not 2 <= t.robust_bits <= 16:
        raise QuarlError(f"train.robust_bits={t.robust_bits} is out of range: use 2..16.")
    one_of("train.tracking.wandb_mode", t.tracking.wandb_mode, ("offline", "online", "disabled"))
    check_trackers(t.tracking)


TRACKING_EXTRA = "quarl[tracking]"


def check_trackers(tracking: Any) -> None:
    """Fail, before any work, when a tracker is chosen whose package is not installed."""
    for flag, package in (("wandb", "wandb"), ("mlflow", "mlflow")):
        if tracking[flag] and importlib.util.find_spec(package) is None:
            raise QuarlError(
                f"train.tracking.{flag}=true needs the {package} package: pip install '{TRACKING_EXTRA}' "
                f"(or pip install {package}), or set train.tracking.{flag}=false."
            )


@functools.cache
def _fields(schema: type) -> tuple[dict[str, Any], list[str]]:
    """A settings dataclass's type hints and field names (get_type_hints evaluates every annotation anew)."""
    return typing.get_type_hints(schema), [f.name for f in dataclasses.fields(schema)]


def _unknown_keys(node: Any, schema: Any, prefix: str = "") -> list[tuple[str, list[str]]]:
    """(key, the keys allowed beside it) for every key of `node` its dataclass `schema` lacks (a
    key added with `+`); free-form mappings (`algo.hyperparams`, `env.kwargs`) take any key."""
    hints, names = _fields(schema)
    found = []
    for key in node.keys():
        if key not in hints:
            found.append((f"{prefix}{key}", [f"{prefix}{n}" for n in names]))
        elif dataclasses.is_dataclass(hints[key]) and isinstance(node[key], DictConfig):
            found += _unknown_keys(node[key], hints[key], f"{prefix}{key}.")
    return found


def _check_keys(cfg: Any, method: method_registry.QuantMethod) -> None:
    """Refuse a key no part of the run reads, in one sentence naming what the place takes."""
    unknown = [(k, allowed) for k, allowed in _unknown_keys(cfg, RunConfig) if k != "hydra"]
    unknown += _unknown_keys(cfg.quant, method.config, "quant.")
    if not unknown:
        return
    key, allowed = unknown[0]
    leaf = key.rsplit(".", 1)[-1]
    near = difflib.get_close_matches(leaf, [a.rsplit(".", 1)[-1] for a in allowed], n=1, cutoff=0.7)
    hint = f" (did you mean {key[: -len(leaf)]}{near[0]}?)" if near else ""
    owner = f"quant={method.name}" if key.startswith("quant.") else "quarl"
    raise QuarlError(f"{key} is not a setting of {owner}{hint}: it takes {', '.join(allowed)}.")


def _check_ints(cfg: Any) -> None:
    """Every integer setting fits the store (a 64-bit integer); Hydra's own settings aside."""

    def walk(value: Any, key: str) -> None:
        if isinstance(value, DictConfig):  # read as plain values at once: node by node took twice as long
            value = OmegaConf.to_container(value, resolve=True, throw_on_missing=False)
        if isinstance(value, dict):
            for child, inner in value.items():
                walk(inner, f"{key}.{child}")
        elif isinstance(value, int) and abs(value) > MAX_INT:
            raise QuarlError(f"{key}={value} is too large: at most {MAX_INT}.")

    for key in cfg:
        if key != "hydra" and not OmegaConf.is_missing(cfg, key):
            walk(cfg[key], str(key))


def check_overrides(cfg: Any, overrides: list[str]) -> None:
    """Refuse a boolean setting given as anything but true or false (OmegaConf reads 2 as true)."""
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        if sep and not key.startswith("hydra.") and isinstance(OmegaConf.select(cfg, key, default=None), bool):
            if value.strip().lower() not in ("true", "false"):
                raise QuarlError(f"{key}={value} is not allowed: use {key}=true or {key}=false.")


def check(cfg: Any) -> None:
    """Reject values that are well-typed but meaningless, naming the field and what is allowed."""
    if not 0 <= cfg.seed <= MAX_SEED:
        raise QuarlError(
            f"seed={cfg.seed} is out of range: use an integer from 0 to {MAX_SEED} (numpy, SB3 and Gymnasium "
            "seed with 32 bits)."
        )
    method = method_registry.of(cfg)
    _check_keys(cfg, method)
    _check_train(cfg)  # before _check_ints: train.steps has a tighter bound (10**12) than the store's
    _check_ints(cfg)
    method.validate(cfg)
    _check_algo(cfg, method)
    _check_policy(cfg, method)
    _check_backend(cfg.quant, method)
    _check_network(cfg)
    if cfg.eval.episodes < 1:
        raise QuarlError(f"eval.episodes={cfg.eval.episodes} must be a positive number of episodes.")
    if cfg.eval.n_envs < 1:
        raise QuarlError(f"eval.n_envs={cfg.eval.n_envs} must be at least 1.")
    if cfg.eval.get("workers") is not None and cfg.eval.workers < 1:
        raise QuarlError(f"eval.workers={cfg.eval.workers} must be at least 1 (or null: automatic).")
