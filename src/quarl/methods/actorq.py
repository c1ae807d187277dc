"""ActorQ: an fp32 learner trains while actor processes act with a quantized copy of its policy
(`quarl.actorq`); the cell is the whole distributed run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from quarl.config.method_registry import QuantConfig, QuantMethod, one_of
from quarl.errors import QuarlError
from quarl.methods._formats import FORMAT_BITS, set_apart

ALGOS = ("dqn", "d4pg")  # discrete and continuous actions
BACKENDS = ("local", "ray")
ACTOR_BITS = (8, 16, 32)  # int8, fp16, fp32 actors
COMM_BITS = (None, 8, 16, 32)
#: actorq.* keys added after ActorQ records were written, with their defaults: a cell keeps its key
#: while they are at them.
LATER_DEFAULTS: dict[str, Any] = {"time_limit_s": None, "cuda_graph": False}
FP32 = 32  # a format's actors execute in fp32 (on the format's values)
NULLABLE = ("n_step", "replay_size", "samples_per_insert", "time_limit_s")  # settings whose null means derived or none
PLACEMENT = ("pin_actors",)  # where processes run, never what they learn: not part of a key


@dataclass
class ActorQQuantConfig(QuantConfig):
    """The actors' precision (the distributed run's settings are the root `actorq:` group)."""

    actor_bits: int = 8  # actors execute the policy in int8 (8), fp16 (16) or fp32 (32)
    # or with weights in a number format (docs/formats.md: fp8_e4m3, mxfp4, nf4, ...), rounded on receipt and run in
    # fp32, as PTQ simulates them (null: as actor_bits says)
    actor_format: Optional[str] = None


class ActorQ(QuantMethod):
    name = "actorq"
    config = ActorQQuantConfig
    trains_policy = True
    result_keys = ("actor_bits", "actor_format")
    algos = ALGOS
    own_algos = ("d4pg",)

    def spec(self, cfg: DictConfig) -> dict[str, Any]:
        """The distributed run shapes the policy and its curve: its settings are part of the key."""
        settings = OmegaConf.to_container(cfg.actorq, resolve=True)
        assert isinstance(settings, dict)
        kept = {
            k: v
            for k, v in settings.items()
            if k not in PLACEMENT and not (k in LATER_DEFAULTS and v == LATER_DEFAULTS[k])
        }
        spec = super().spec(cfg)
        if spec.get("actor_format") is None:  # a key added later: every earlier cell keeps its key
            spec.pop("actor_format", None)
        else:
            spec.pop("actor_bits")  # a format's actors execute in fp32, whatever actor_bits says
        return {**spec, "actorq": kept}

    def used_bits(self, quant: DictConfig) -> int:
        """The actors' width: the learner trains in fp32, the actors act at quant.actor_bits, or on
        weights of quant.actor_format's element bits."""
        return FORMAT_BITS[quant.actor_format] if quant.get("actor_format") else int(quant.actor_bits)

    def number_format(self, quant: DictConfig) -> str:
        return str(quant.get("actor_format") or "int")

    def implies_bits(self, quant: DictConfig) -> bool:
        return bool(quant.get("actor_format"))

    def describe(self, quant: DictConfig) -> str:
        return f"actorq {quant.actor_format} actors" if quant.get("actor_format") else self.name

    def prepare(self, cfg: DictConfig) -> None:
        if cfg.quant.get("actor_format"):
            cfg.quant.actor_bits = FP32  # recorded as run: the format's values, executed in fp32

    def validate(self, cfg: DictConfig) -> None:
        a = cfg.actorq
        if cfg.algo.name not in ALGOS:
            raise QuarlError(
                f"quant=actorq trains algo=dqn (discrete actions) or algo=d4pg (continuous), not algo={cfg.algo.name}."
            )
        if cfg.train.get("robust"):
            raise QuarlError(
                f"train.robust={cfg.train.robust} trains SB3 and QAT policies; quant=actorq trains its own "
                "learner: use train.robust=null with quant=actorq."
            )
        if cfg.train.get("stop_at_return") is not None:
            raise QuarlError(
                f"train.stop_at_return={cfg.train.stop_at_return} ends SB3 and QAT trainings; quant=actorq "
                "ends at its own target: use actorq.stop_at_return instead."
            )
        if cfg.train.get("amp"):
            raise QuarlError(
                "train.amp=true trains SB3 and QAT policies in mixed precision; quant=actorq's learner trains "
                "in fp32: use train.amp=false with quant=actorq."
            )
        if cfg.train.keep_best:
            raise QuarlError(
                "train.keep_best=true applies to SB3 and QAT trainings; quant=actorq records its final "
                "learner: use train.keep_best=false with quant=actorq."
            )
        if a.actors < 1:
            raise QuarlError(f"actorq.actors={a.actors} must be at least 1 actor process.")
        one_of("actorq.backend", a.backend, BACKENDS)
        if a.pin_actors and a.backend != "local":
            raise QuarlError(
                "actorq.pin_actors=true places local actor processes; Ray places its own actors: "
                "use actorq.pin_actors=false with actorq.backend=ray."
            )
        if a.cuda_graph and cfg.algo.name != "dqn":
            raise QuarlError(
                f"actorq.cuda_graph=true captures DQN's update; algo={cfg.algo.name} updates eagerly: "
                "use actorq.cuda_graph=false."
            )
        if cfg.quant.get("actor_format") is not None:
            one_of("quant.actor_format", cfg.quant.actor_format, tuple(FORMAT_BITS))
            if set_apart(cfg.quant, "actor_bits", FP32, ActorQQuantConfig.actor_bits):
                raise QuarlError(
                    f"quant.actor_bits={cfg.quant.actor_bits} and quant.actor_format={cfg.quant.actor_format} both set "
                    "the actors' precision: give one of them (a format's actors run its values in fp32)."
                )
        if cfg.quant.actor_bits not in ACTOR_BITS:
            raise QuarlError(
                f"quant.actor_bits={cfg.quant.actor_bits} cannot be executed by an actor: use 8 (int8), "
                "16 (fp16) or 32 (fp32)."
            )
        if a.comm_bits not in COMM_BITS:
            raise QuarlError(
                f"actorq.comm_bits={a.comm_bits} is not allowed: weights travel at 8, 16 or 32 bits "
                "(or null: at quant.actor_bits)."
            )
        positive = {
            "update_period": a.update_period,
            "publish_period": a.publish_period,
            "chunk_size": a.chunk_size,
            "n_step": a.n_step,
            "replay_size": a.replay_size,
            "samples_per_insert": a.samples_per_insert,
            "log_interval_s": a.log_interval_s,
            "stall_timeout_s": a.stall_timeout_s,
            "time_limit_s": a.time_limit_s,
        }
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise QuarlError(
                    f"actorq.{name}={value} must be positive" + (" (or null)." if name in NULLABLE else ".")
                )
        for name in ("min_replay", "max_restarts"):
            if a[name] is not None and a[name] < 0:
                raise QuarlError(f"actorq.{name}={a[name]} must be >= 0.")

    def own_cell(self, ctx: Any) -> Any:
        from quarl.actorq.cell import run_actorq_cell  # torch.multiprocessing and Ray only when used

        return run_actorq_cell(ctx)


METHODS = (ActorQ(),)
