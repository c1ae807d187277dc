"""What the report's prose says about quarl's own settings, read from where each is defined: a named
sweep's grid and header (`conf/sweep/<name>.yaml`), the verdicts' constants, the config's defaults.
A template writes `{{ sweep("qat_classic").seeds }}`, never a number typed by hand
(`tests/report/test_templates.py` fails on a digit a template states without data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from quarl.collate import stats, verdicts
from quarl.config import schema
from quarl.rl import matrix
from quarl.rl.baseline import reward_threshold

SWEEPS = Path(__file__).resolve().parents[1] / "conf" / "sweep"
WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def counted(n: int, noun: str) -> str:
    """'three seeds', 'one seed', '14 seeds': a count in words up to twelve, as prose writes it."""
    word = WORDS[n] if 0 <= n < len(WORDS) else f"{n:,}"
    return f"{word} {noun}{'' if n == 1 else 's'}"


def widths(bits: list[int]) -> str:
    """'2..8' for a run of consecutive widths, else '2, 4, 6 and 8'."""
    if len(bits) > 2 and bits == list(range(bits[0], bits[-1] + 1)):
        return f"{bits[0]}..{bits[-1]}"
    shown = [str(b) for b in bits]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


@dataclass(frozen=True)
class SweepFacts:
    """One named sweep as its file defines it: the sweeper's grid, its fixed settings, its header."""

    name: str
    grid: dict[str, list[str]]
    fixed: dict[str, Any]
    header: str

    @property
    def seeds(self) -> str:
        """Its seeds, counted in words ('five seeds')."""
        return counted(len(self.grid.get("seed", ["0"])), "seed")

    @property
    def bits(self) -> str:
        """The integer widths it quantizes to, fp32's 32 left out ('2..8')."""
        grid = self.grid.get("quant.bits") or [str(self.fixed.get("quant", {}).get("bits", 8))]
        return widths(sorted(int(b) for b in grid if int(b) < 32))

    def last(self, key: str) -> str:
        """The last value its grid gives `key` ('1024' of `quant.min_elements: 0,1024`)."""
        return self.grid[key][-1]

    @property
    def cost(self) -> str:
        """The cost its header states ('see its header' where it states none)."""
        found = re.search(r"Cost[^:]*: (.*?)(?= Quantizer:| Policies:| Run:|$)", self.header)
        return found.group(1).strip() if found else "see its header"

    @property
    def command(self) -> str:
        """The command its header gives, else the plain multirun of it."""
        found = re.search(r"Run: (.*?)(?=\s{2,}|\(|$)", self.header)
        return found.group(1).strip() if found else f"python run.py -m +sweep={self.name}"

    def pairs(self, conf: Path = SWEEPS.parent) -> list[tuple[str, str]]:
        """The (algo, env) pairs of its grid that apply (the rest are recorded as n/a)."""
        return [
            (algo, env)
            for env in self.grid.get("env", [])
            for algo in self.grid.get("algo", [])
            if matrix.applies(conf, algo, env)
        ]


def sweep(name: str, folder: Path = SWEEPS) -> SweepFacts:
    """The named sweep `name` in `folder` (quarl's own by default)."""
    path = folder / f"{name}.yaml"
    text = path.read_text()
    data = yaml.safe_load(text) or {}
    params = data.get("hydra", {}).get("sweeper", {}).get("params", {}) or {}
    header = " ".join(line[2:] for line in text.splitlines() if line.startswith("# ") and "@package" not in line)
    grid = {str(k): [v.strip() for v in str(v).split(",")] for k, v in params.items()}
    return SweepFacts(name, grid, {k: v for k, v in data.items() if k != "hydra"}, header)


def tuned(algo: str, env: str, zoo: str = "", conf: Path = SWEEPS.parent) -> dict[str, Any]:
    """The tuned settings quarl ships for (`algo`, `env`): `conf/tuned/[<zoo>/]<algo>/<env>.yaml`."""
    path = conf / "tuned" / zoo / algo / f"{env}.yaml"
    return yaml.safe_load(path.read_text())


def percent(x: float) -> str:
    """0.95 as '95%'."""
    return f"{100 * x:g}%"


#: What every template may name besides its own values: the settings the prose describes.
GLOBALS: dict[str, Any] = {
    "sweep": sweep,
    "tuned": tuned,
    "solved": reward_threshold,
    "counted": counted,
    "level": percent(stats.CONFIDENCE),
    "alpha": f"{verdicts.ALPHA:g}",
    "e_margin": f"{verdicts.E_MARGIN:g}",
    "scale_margin": percent(verdicts.SCALE_MARGIN),
    "train": schema.TrainConfig(),
    "eval": schema.EvalConfig(),
}
