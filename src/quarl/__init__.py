"""quarl: quantized reinforcement learning studies (PTQ, QAT, ActorQ) driven by Hydra configs."""

__version__ = "0.1.0"

from pathlib import Path

#: The configs and named sweeps (conf/sweep), shipped inside the package.
CONF_DIR = Path(__file__).resolve().parent / "conf"
