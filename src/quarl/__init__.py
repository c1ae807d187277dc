"""quarl: quantized reinforcement learning studies (PTQ, QAT, ActorQ) driven by Hydra configs."""

__version__ = "0.1.0"
