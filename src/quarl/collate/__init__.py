"""Collation: the store's records turned into the study's plots and tables.

``collate(store, out_dir, filters)`` writes, under `out_dir` (file names fixed; the quantizer's
scheme, granularity and bias setting go into each table's header and each plot's title):

- ``sweet_spot/<algo>_<env>.png|pdf`` (and ``<env>_all-algos`` when several algorithms ran there):
  mean reward vs bits with Student-t 95% intervals across seeds; ``sweet_spot/points.csv``;
- ``agreement/<algo>_<env>.png|pdf``: reward vs bits beside action agreement with fp32 vs bits;
- ``tables/errors_<algo>.md|csv|tex``: the paper's table (fp32, fp16, E_fp16, int8, E_int8, a mean
  row of E; published values beside ours), ``tables/e_by_bits_<algo>.*`` (E per bits x env),
  ``tables/agreement_<algo>.*`` (action agreement, KL, MAD by bits), a section per quantizer in
  each, and ``tables/published_vs_reproduced.*``;
- ``aggregate/aggregate.png|pdf|csv`` (IQM and mean of the normalised score 1 - E per method and
  bits, stratified bootstrap) and ``aggregate/heatmap_E.png|pdf`` (E over algo x env x bits);
- ``weights/<algo>_<env>_seed<k>.png|pdf`` (histograms with the n-bit grid), ``weights/layers.*``
  (statistics per layer), ``weights/spread_vs_E.png|pdf|csv`` (spread vs E across policies);
- ``actorq/...`` for ActorQ records (convergence, censored time to reward, runtime breakdown);
- ``README.md``: what was selected, how many runs, every note (missing baselines, single seeds,
  E n/a), and ``.quarl-collate.json``, the list of files the next collation there replaces.

A mean over seeds pools only records of one training (`quarl.collate.trainings`): where an (algo, env)
holds several (another budget, hyperparameters, env settings, keep-best, pretrained source), each is
its own series, its algo labelled by what differs ('ppo (train.steps=8192)', the filter that selects
it; file names follow: ``errors_ppo-train-steps-8192``), with its own fp32 baseline and a note.

An E that is n/a (rel_error NULL: fp32 reward too close to 0) is shown as n/a with its note and
enters no mean, aggregate or plot. Bad input (an empty store, filters that match nothing, one
seed, a missing baseline) gives notes and whatever outputs can still be made, never a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarl.collate.collation import Results, collate, load, prepare, select

__all__ = ["collate", "load", "prepare", "select", "Results"]


def __getattr__(name: str) -> Any:
    """`collate`, `load`, `prepare`, `select` and `Results` from `quarl.collate.collation`, imported at first
    use: what every run imports of this package (the end-of-sweep callback, a search's results) loads no pandas."""
    if name in __all__:
        from quarl.collate import collation

        return getattr(collation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
