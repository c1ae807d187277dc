"""The `quarl` command: run cells and sweeps (`quarl run`, the same as run.py), look at and maintain
the results store."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from quarl.config import backend_registry
from quarl.errors import QuarlError, ended, ending_like_ctrl_c
from quarl.store import record_files, sqlite, studies
from quarl.store.flags import FLAG_LEGEND, with_flags
from quarl.store.listing import one_record, pack, shorten, shown, status_lines, summary_columns, terminal_width
from quarl.store.query import DEFAULT_STORE, load, open_store, weight_bits

log = logging.getLogger("quarl")


def _filters(pairs: list[str]) -> dict[str, str]:
    filters = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise QuarlError(f"Filter '{pair}' is not KEY=VALUE (for example algo=dqn or quant.bits=4).")
        filters[key] = value
    return filters


def cmd_results(args: argparse.Namespace) -> None:
    df = with_flags(load(args.store, _filters(args.filters)))
    if df.empty:
        log.warning("No records in %s match %s.", args.store, " ".join(args.filters) or "(no filter)")
        return
    columns = list(df.columns) if args.all else summary_columns(df)
    if args.csv:
        df[columns].to_csv(sys.stdout, index=False)
        return
    with pd.option_context("display.max_rows", None, "display.width", 250, "display.max_columns", None):
        print(shown(df, columns).to_string(index=False, na_rep=""), flush=True)  # before the legend (stderr)
    if "fp32_flag" in columns:  # the legend is commentary: on stderr, the table alone on stdout
        log.info("%s", FLAG_LEGEND)


def cmd_rebuild(args: argparse.Namespace) -> None:
    if not args.root.is_dir():
        raise QuarlError(f"{args.root} is not a folder: give the folder that holds the run dirs (outputs/).")
    count = record_files.rebuild(args.root, sqlite.Store(args.store))
    log.info("Wrote %d records found under %s into %s.", count, args.root, args.store)


def cmd_collate(args: argparse.Namespace) -> None:
    from quarl.collate import collate

    parts = ["quarl collate", f"--store {args.store}", *([f"--sweep {args.sweep}"] if args.sweep else [])]
    parts += [f"--out {args.out}", f"--bits {args.bits}", *(["--log-y"] if args.log_y else [])]
    parts += [*([f"--formats {args.formats}"] if args.formats else []), *args.filters]
    options: dict[str, Any] = {k: getattr(args, k) for k in ("bits", "sweep", "overwrite", "log_y", "force")}
    formats = args.formats.split(",") if args.formats else None
    written = collate(args.store, args.out, _filters(args.filters), command=" ".join(parts), formats=formats, **options)
    for path in written:
        print(path)


def cmd_export(args: argparse.Namespace) -> None:
    import json

    from omegaconf import OmegaConf

    from quarl.app import CONF_DIR
    from quarl.config.method_registry import policy_config
    from quarl.deploy import export
    from quarl.deploy.edge.export import check_flags
    from quarl.deploy.onnx_export import check_new, export_precision, provenance
    from quarl.quantize.calibration import calibrator
    from quarl.quantize.weights import quantize_policy
    from quarl.sweeps import run_cell_key
    from quarl.train.cache import recorded

    check_flags(args.format, args.precision, args.activations, args.weight_coding)  # before any warning
    df = load(args.store, _filters(args.filters))
    typed = " ".join(args.filters) or "(no filter)"
    record, note = one_record(df[df["status"] == "done"], typed, run_cell=run_cell_key(CONF_DIR, args.filters))
    if note:
        log.info("%s", note)
    cfg = OmegaConf.create(json.loads(record["config"]))
    precision = export_precision(cfg, args.format, args.precision, weight_bits(cfg.quant))
    check_new(args.out)  # before anything is loaded or calibrated
    policy = recorded(record, policy_config(cfg))  # where its run found it, from any folder
    model = policy.load()
    quantize_policy(model, cfg.quant, calibrate=calibrator(cfg, policy))  # the record's own calibration
    if args.format != "onnx":
        from quarl.deploy.edge.export import export_record

        edge_precision = args.precision or precision.replace("fp32", "int8")
        origin = provenance(cfg, edge_precision, record["cell_key"])
        report = export_record(
            model, cfg, policy, args.out, args.format, edge_precision, args.activations, args.weight_coding, origin
        )
        print(report.text())
        return
    origin = provenance(cfg, precision, record["cell_key"])
    print(export(model, args.out, precision, policy.obs_transform(), env_id=cfg.env.id, origin=origin))


def cmd_plan(args: argparse.Namespace) -> None:
    from quarl.app import CONF_DIR
    from quarl.sweeps import plan

    if args.store is not None:
        open_store(args.store)  # a store named on the command line must be there (and quarl's)
    cells = plan(CONF_DIR, args.overrides, args.store).drop(columns=["cell_key", "overrides"])
    if (cells["format"] == "int").all():  # a sweep of integer cells: the column says nothing
        cells = cells.drop(columns=["format"])
    width = terminal_width()
    table = cells.assign(why="").to_string(index=False)
    room = max(width - max(map(len, table.splitlines())), MIN_VALUE)  # what is left for each cell's reason
    print(cells.assign(why=cells["why"].map(lambda why: shorten(why, room))).to_string(index=False))
    cut = sorted({why for why in cells["why"] if len(why) > room})
    if cut:  # the reasons cut short above, each once in full
        print("\n" + "\n".join(pack([why], width, indent="  ") for why in cut))
    counts = ", ".join(f"{n} {state}" for state, n in cells["state"].value_counts().items())
    print(f"{len(cells)} cells: {counts}")


def cmd_status(args: argparse.Namespace) -> None:
    from quarl.store.listing import status

    grid, failed = status(args.store, _filters(args.filters))
    if grid.empty:
        log.warning("No records in %s match %s.", args.store, " ".join(args.filters) or "(no filter)")
        return
    width = terminal_width()
    grid.index = grid.index.map(lambda key: tuple(shorten(str(v)) for v in key) if isinstance(key, tuple) else key)
    table = grid.to_string()
    print(table if max(map(len, table.splitlines())) <= width else "\n".join(status_lines(grid, width)))
    if not failed.empty:
        print(f"\n{len(failed)} failed (traceback in each run dir's error.txt):")
        for _, row in failed.iterrows():
            cell = [
                shorten(str(v)) if k in ("algo", "env", "setting") else f"{k}={shorten(str(v))}"
                for k, v in row.items()
                if k not in ("message", "run_dir")
            ]
            print(pack(cell, width, sep=" ", indent="    "))
            print(pack([str(row.get("message") or "")], width, indent="    ", first="  "))
            print(pack([f"in {row.get('run_dir')}"], width, indent="    ", first="  "))


#: The fewest characters a shortened value keeps.
MIN_VALUE = 24


def cmd_matrix(args: argparse.Namespace) -> None:
    from quarl.app import CONF_DIR
    from quarl.rl.matrix import LEGEND, matrix

    table = matrix(CONF_DIR, args.suite)
    with pd.option_context("display.max_rows", None, "display.width", 250):
        print(table.to_string(index=False))
    print("\n" + "\n".join(f"{k:>10}: {v}" for k, v in LEGEND.items()))


def cmd_report(args: argparse.Namespace) -> None:
    from quarl.report import build as report
    from quarl.report.campaign import REPORT

    folder, sweeps = args.records.parent, args.sweeps
    if args.archive is not None:
        print(f"{args.records} holds {report.archive(args.archive, args.records)} records")
    if args.check:
        diff = report.check(args.records, folder, sweeps)
        if diff:
            raise QuarlError(
                f"{folder / REPORT} differs from what {args.records} gives "
                f"({len(diff)} diff lines, first: {diff[0]!r}): run `quarl report` and commit it."
            )
        print(f"{folder / REPORT} matches {args.records}.")
        return
    print(f"Wrote {report.write(args.records, folder, sweeps)}")


def cmd_sensitivity(args: argparse.Namespace) -> None:
    from quarl.app import CONF_DIR
    from quarl.sensitivity.command import run_study

    for path in run_study(
        CONF_DIR, args.overrides, args.bits or [], args.min_agreement, args.max_error, args.out, not args.no_search
    ):
        print(path)


def cmd_run(args: argparse.Namespace) -> None:
    """`quarl run ARGS` is `python run.py ARGS` from any folder: the arguments go to the Hydra app."""
    from quarl.app import main as run_app

    sys.argv = [sys.argv[0], *args.overrides]
    run_app()


def _store_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--store", type=Path, default=DEFAULT_STORE, help="the results store (default: %(default)s)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="quarl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    _run_command(sub)
    _results_command(sub)
    _rebuild_command(sub)
    _collate_command(sub)
    _export_command(sub)
    _plan_command(sub)
    _status_command(sub)
    _report_command(sub)
    _sensitivity_command(sub)
    _matrix_command(sub)
    studies.add_command(sub, _store_option)  # quarl trials
    return p


def _run_command(sub: Any) -> None:
    # No option prefix ("\0" never starts an argument): -m, --cfg, --help and the rest all go to Hydra.
    run = sub.add_parser(
        "run",
        add_help=False,
        prefix_chars="\0",
        help="run a cell or, with -m, a sweep: the same as `python run.py ARGS` (quarl run --help)",
    )
    run.add_argument("overrides", nargs=argparse.REMAINDER, metavar="ARGS", help="run.py's arguments and overrides")
    run.set_defaults(func=cmd_run)


def _results_command(sub: Any) -> None:
    results = sub.add_parser("results", help="print the run records, filtered by config keys")
    results.add_argument("filters", nargs="*", metavar="KEY=VALUE", help="e.g. algo=dqn quant.bits=4")
    _store_option(results)
    results.add_argument("--all", action="store_true", help="every column, not the summary's")
    results.add_argument(
        "--csv",
        action="store_true",
        help="CSV of the stored values instead of a table, for scripts: E (rel_error) as a fraction, not in "
        "percent; booleans as 1 / 0",
    )
    results.set_defaults(func=cmd_results)


def _rebuild_command(sub: Any) -> None:
    rb = sub.add_parser("rebuild", help="write the records kept as JSON in run dirs into the store")
    rb.add_argument(
        "root",
        type=Path,
        nargs="?",
        default=Path("outputs"),
        help="folder searched for the run dirs' *record.json copies (default: %(default)s)",
    )
    _store_option(rb)
    rb.set_defaults(func=cmd_rebuild)


def _collate_command(sub: Any) -> None:
    co = sub.add_parser("collate", help="write the study's plots and tables (sweet spots, error tables, ...)")
    co.add_argument("filters", nargs="*", metavar="KEY=VALUE", help="e.g. algo=dqn,ppo env=cartpole quant.method=ptq")
    _store_option(co)
    co.add_argument(
        "--out",
        type=Path,
        default=Path("outputs/collate"),
        help="folder to write into; an earlier collation there is replaced (default: %(default)s)",
    )
    co.add_argument("--overwrite", action="store_true", help="empty a non-empty --out that no collation wrote")
    co.add_argument(
        "--sweep",
        type=Path,
        default=None,
        metavar="DIR",
        help="only the cells of the sweep run in DIR (outputs/multirun/DATE/TIME) and their fp32 baselines",
    )
    co.add_argument(
        "--bits", type=int, default=8, help="bit width of the grid in the weight report, 2..16 (default: %(default)s)"
    )
    co.add_argument("--log-y", action="store_true", help="weight histograms on a log count axis")
    co.add_argument("--formats", metavar="LIST", help="each figure's files: png, pdf or png,pdf (the default)")
    co.add_argument("--force", action="store_true", help="draw again even when --out is up to date")
    co.set_defaults(func=cmd_collate)


def _export_command(sub: Any) -> None:
    ex = sub.add_parser(
        "export",
        help="write one stored policy as a standalone ONNX file, a full-integer LiteRT model or a C policy",
    )
    ex.add_argument(
        "filters",
        nargs="*",
        metavar="KEY=VALUE",
        help="pick one finished record, e.g. algo=ppo quant=ptq quant.bits=8 (records that differ only in "
        "quant.backend or eval.* hold one policy: the most recent is exported)",
    )
    ex.add_argument(
        "--out",
        type=Path,
        required=True,
        help="what to write (required; must not exist): the file or folder --format writes",
    )
    ex.add_argument(
        "--format",
        choices=backend_registry.export_formats(),
        default="onnx",
        help=backend_registry.export_help(),
    )
    ex.add_argument(
        "--precision",
        choices=("fp32", "int8", "int4", "int2"),
        default=None,
        help="the file's weights (default: the record's own: fp32 for fp32; int8, int4 or int2 for a policy "
        "quantized to at most 8, 4 or 2 bits; fp32, which holds them exactly, for fp16, bf16 and 9..16 bits, "
        "saying so). The full-integer formats take int8 (an fp32 record's default), or int4 and int2 where they pack "
        "them",
    )
    ex.add_argument(
        "--activations",
        choices=("int8", "int16"),
        default="int8",
        help="the full-integer formats' activations: int8 (default, TFLite's int8 scheme) or int16 (its 16x8 "
        "scheme: int16 activations, int8 weights, int64 biases; finer where the greedy action turns on small "
        "logit gaps)",
    )
    ex.add_argument(
        "--weight-coding",
        choices=("packed", "huffman"),
        default="packed",
        help="--format c: how policy.c stores its weights: packed (default; each in --precision's bits, the "
        "fastest call) or huffman (the weights, Tanh tables and shifts in one canonical Huffman stream, "
        "decoded as the policy runs: about 3 bits per 4-bit weight, the smallest flash, a slower call)",
    )
    _store_option(ex)
    ex.set_defaults(func=cmd_export)


def _plan_command(sub: Any) -> None:
    pl = sub.add_parser("plan", help="list the cells a run.py sweep would run, and which are done, without running")
    pl.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="run.py overrides, e.g. +sweep=smoke")
    pl.add_argument("--store", type=Path, default=None, help="an existing store to check (default: store.path)")
    pl.set_defaults(func=cmd_plan)


def _status_command(sub: Any) -> None:
    st = sub.add_parser("status", help="done / failed / pruned / running / skipped per cell, read from the store")
    st.add_argument("filters", nargs="*", metavar="KEY=VALUE", help="e.g. algo=dqn")
    _store_option(st)
    st.set_defaults(func=cmd_status)


def _report_command(sub: Any) -> None:
    rp = sub.add_parser("report", help="write the reproduction report (published vs quarl) from archived records")
    rp.add_argument(
        "records",
        type=Path,
        nargs="?",
        default=Path("docs/reproduction/records"),
        help="folder of record JSON files; the report is written beside it (default: %(default)s)",
    )
    rp.add_argument(
        "--sweeps",
        type=Path,
        default=Path(__file__).parent / "conf" / "sweep",
        help="the named sweeps, for the not-run table (default: quarl's conf/sweep)",
    )
    rp.add_argument("--check", action="store_true", help="only check that the committed report matches the records")
    rp.add_argument(
        "--archive",
        type=Path,
        default=None,
        metavar="ROOT",
        help="first copy the done records under ROOT (run dirs) into the records folder",
    )
    rp.set_defaults(func=cmd_report)


def _sensitivity_command(sub: Any) -> None:
    se = sub.add_parser(
        "sensitivity",
        help="each layer (and the input) quantized alone at each width, and the smallest "
        "per-layer-bits policy that keeps its behaviour (a quant.layer_bits cell for run.py)",
    )
    se.add_argument(
        "overrides", nargs="*", metavar="OVERRIDE", help="run.py overrides of the cell, e.g. algo=dqn env=cartpole"
    )
    se.add_argument(
        "--bits",
        default="2,3,4,6,8",
        help="bit widths to study and search, comma-separated, 2..16 (default: %(default)s)",
    )
    se.add_argument(
        "--min-agreement",
        type=float,
        default=0.99,
        help="bound: action agreement with fp32 at least this (default: %(default)s)",
    )
    se.add_argument(
        "--max-error", type=float, default=None, help="bound: also E at most this fraction (0.01: E <= 1%%)"
    )
    se.add_argument("--out", type=Path, default=None, help="folder to write into (default outputs/sensitivity/<cell>)")
    se.add_argument("--no-search", action="store_true", help="the study only")
    se.set_defaults(func=cmd_sensitivity)


def _matrix_command(sub: Any) -> None:
    mx = sub.add_parser("matrix", help="which algorithm runs on which env (tuned, default, n/a)")
    # the suites' names come with quarl.rl.envs, which every other command would then import (torch, SB3)
    mx.add_argument("--suite", default=None, help="only this suite's envs (an unknown one lists the suites)")
    mx.set_defaults(func=cmd_matrix)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `quarl results | head` ends quietly
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parser().parse_args(argv)
    try:
        with ending_like_ctrl_c() if args.command != "run" else contextlib.nullcontext():  # run.py: its own
            args.func(args)
    except KeyboardInterrupt as exc:
        how, code = ended(exc)
        log.error("quarl %s: %s; what it wrote so far is replaced when it runs again.", args.command, how)
        return code
    except QuarlError as exc:
        log.error("quarl: %s", exc)
        return 1
    except OSError as exc:  # a read-only or full folder the command was told to write into
        where = exc.filename or getattr(args, "out", None) or getattr(args, "store", None) or "the folder written"
        log.error("quarl: %s: %s.", where, exc.strerror or exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
