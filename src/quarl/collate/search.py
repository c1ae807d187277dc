"""The Optuna searches beside a results store (`hydra/sweeper=optuna` keeps its studies in
`optuna.db` next to it): each study's optimisation history and, with two objectives or more, its
Pareto front. The sweeper draws them into its sweep dir at the end of a search; `quarl collate`
draws every study of the store into `figures/`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from quarl.store import studies

log = logging.getLogger(__name__)

DATABASE = studies.DATABASE  # beside the results store


def complete(study: Any) -> list[Any]:
    """The study's complete trials (not running, failed or pruned)."""
    import optuna

    return [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]


def _objectives(study: Any) -> list[str]:
    names = study.user_attrs.get("objectives") or []
    return [str(n) for n in names] or [f"objective {i}" for i in range(len(study.directions))]


def _directions(study: Any) -> list[str]:
    return [d.name.lower() for d in study.directions]


def plain(value: Any) -> Any:
    """A trial parameter as a label writes it (numbers trimmed)."""
    return round(value, 6) if isinstance(value, float) else value


def plot_history(path: Path, study: Any) -> Path:
    """The first objective of every complete trial by trial number, the spread over its seeds as error
    bars, and the best value so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = complete(study)
    objective, direction = _objectives(study)[0], _directions(study)[0]
    numbers = [t.number for t in trials]
    values = [t.values[0] for t in trials]
    spread = [t.user_attrs.get(f"{objective}_std", 0.0) for t in trials]
    seeds = study.user_attrs.get("seeds", 1)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.errorbar(numbers, values, yerr=spread, fmt="o", ms=4, capsize=2, label=f"trial (std over {seeds} seeds)")
    best: list[float] = []
    for value in values:
        better = not best or (value > best[-1] if direction == "maximize" else value < best[-1])
        best.append(value if better else best[-1])
    ax.step(numbers, best, where="post", color="C3", label=f"best so far ({direction})")
    ax.set_xlabel("trial")
    ax.set_ylabel(objective)
    return _save(fig, ax, f"{study.study_name}: optimisation history", path)


def plot_pareto(path: Path, study: Any) -> Path:
    """The first two objectives of every complete trial; the Pareto front joined and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = complete(study)
    front = {t.number for t in study.best_trials}
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    others = [t for t in trials if t.number not in front]
    ax.scatter([t.values[0] for t in others], [t.values[1] for t in others], c="0.6", s=18, label="trial")
    best = sorted((t for t in trials if t.number in front), key=lambda t: t.values[0])
    ax.plot([t.values[0] for t in best], [t.values[1] for t in best], "o-", c="C3", ms=5, label="Pareto front")
    for t in best:
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={plain(v)}" for k, v in t.params.items())
        ax.annotate(label, (t.values[0], t.values[1]), fontsize=6, xytext=(3, 3), textcoords="offset points")
    names = [f"{o} ({d})" for o, d in zip(_objectives(study), _directions(study))]
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    return _save(fig, ax, f"{study.study_name}: Pareto front", path)


def _save(fig: Any, ax: Any, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figures(study: Any, folder: Path, prefix: str = "search") -> list[Path]:
    """`<prefix>_history.png` and, with two objectives or more, `<prefix>_pareto.png` in `folder`."""
    if not complete(study):
        return []
    folder.mkdir(parents=True, exist_ok=True)
    drawn = [plot_history(folder / f"{prefix}_history.png", study)]
    if len(study.directions) > 1:
        drawn.append(plot_pareto(folder / f"{prefix}_pareto.png", study))
    return drawn


def write_searches(store: Path, out: Path) -> list[Path]:
    """Every study in the store's `optuna.db`, drawn into `out`/figures as `search_<study>_*.png`."""
    database = Path(store).parent / DATABASE
    if not database.exists():
        return []
    try:
        import optuna
    except ImportError:
        log.warning("%s holds Optuna searches, but optuna is not installed: pip install optuna.", database)
        return []
    storage = studies.open_storage(f"sqlite:///{database}")  # read only: no table created, no schema upgraded
    drawn = []
    for name in optuna.get_all_study_names(storage):
        study = optuna.load_study(study_name=name, storage=storage)
        drawn += figures(study, out / "figures", f"search_{name}")
    return drawn
