"""The `quarl` command: look at and maintain the results store (runs are started with run.py)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import pandas as pd

from quarl.errors import QuarlError
from quarl.results import DEFAULT_STORE, load
from quarl.store import Store, rebuild

log = logging.getLogger("quarl")

SUMMARY_COLUMNS = [
    "algo", "env", "quant", "quant.bits", "quant.scheme", "quant.granularity", "seed",
    "status", "reward_mean", "reward_std", "fp32_reward", "rel_error", "n_episodes", "policy_bytes",
]


def _filters(pairs: list[str]) -> dict[str, str]:
    filters = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise QuarlError(f"Filter '{pair}' is not KEY=VALUE (for example algo=dqn or quant.bits=4).")
        filters[key] = value
    return filters


def cmd_results(args: argparse.Namespace) -> None:
    df = load(args.store, _filters(args.filters))
    if df.empty:
        log.warning("No records in %s match %s.", args.store, " ".join(args.filters) or "(no filter)")
        return
    columns = [c for c in SUMMARY_COLUMNS if c in df.columns] if not args.all else list(df.columns)
    if args.csv:
        df[columns].to_csv(sys.stdout, index=False)
        return
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_columns", None):
        print(df[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def cmd_rebuild(args: argparse.Namespace) -> None:
    if not args.root.is_dir():
        raise QuarlError(f"{args.root} is not a folder: give the folder that holds the run dirs (outputs/).")
    count = rebuild(args.root, Store(args.store))
    log.info("Wrote %d records found under %s into %s.", count, args.root, args.store)


def cmd_collate(args: argparse.Namespace) -> None:
    from quarl.collate import collate

    filters = _filters(args.filters)
    parts = ["quarl collate", f"--store {args.store}", f"--out {args.out}", f"--bits {args.bits}", *args.filters]
    written = collate(args.store, args.out, filters, bits=args.bits, command=" ".join(parts))
    for path in written:
        print(path)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quarl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    results = sub.add_parser("results", help="print the run records, filtered by config keys")
    results.add_argument("filters", nargs="*", metavar="KEY=VALUE", help="e.g. algo=dqn quant.bits=4")
    results.add_argument("--store", type=Path, default=DEFAULT_STORE)
    results.add_argument("--all", action="store_true", help="every column, not a summary")
    results.add_argument("--csv", action="store_true", help="CSV instead of a table")
    results.set_defaults(func=cmd_results)
    rb = sub.add_parser("rebuild", help="write the records kept as JSON in run dirs into the store")
    rb.add_argument("root", type=Path, nargs="?", default=Path("outputs"))
    rb.add_argument("--store", type=Path, default=DEFAULT_STORE)
    rb.set_defaults(func=cmd_rebuild)
    co = sub.add_parser("collate", help="write the study's plots and tables (sweet spots, error tables, ...)")
    co.add_argument("filters", nargs="*", metavar="KEY=VALUE", help="e.g. algo=dqn,ppo env=cartpole quant.method=ptq")
    co.add_argument("--store", type=Path, default=DEFAULT_STORE)
    co.add_argument("--out", type=Path, default=Path("outputs/collate"), help="folder to write into")
    co.add_argument("--bits", type=int, default=8, help="bit width of the grid in the weight report (2..16)")
    co.set_defaults(func=cmd_collate)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except QuarlError as exc:
        log.error("quarl: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
