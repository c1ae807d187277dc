"""The device ledger (issue 59): the GPU work as jobs that each fit a device call, with their
measured (or estimated) costs and whether they are done, derived from what has landed.

    python benchmarks/device/ledger.py status                 # job, cost, done, what it still needs
    python benchmarks/device/ledger.py plan --budget-s 540    # what a call of that budget would run
    python benchmarks/device/ledger.py run --budget-s 540 --out $OUT   # on the device (gpu.sh calls it)
    python benchmarks/device/ledger.py land <files_at>        # back here: records, the run's page, costs

The jobs live in ledger.yaml beside this file (its header says what a job holds). Running and
landing are in ledger_run.py and ledger_land.py. Standard library and PyYAML only (quarl is imported
only to gather the records of a run).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ledger_jobs import LEDGER, MKDOCS, RECORDS, ROOT, RUNS, STATE, Landed, LedgerError, load, plan, status_table


def main(argv: list[str] | None = None) -> int:
    """The command line: status, plan, run, land."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ledger", type=Path, default=LEDGER)
    ap.add_argument("--records", type=Path, default=RECORDS, help="the landed records")
    ap.add_argument("--state", type=Path, default=STATE, help="resumable jobs' state folders")
    sub = ap.add_subparsers(dest="verb", required=True)
    sub.add_parser("status", help="job, cost, done, what it still needs")
    p = sub.add_parser("plan", help="what a call would run")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--only", nargs="+")
    r = sub.add_parser("run", help="run the next jobs that fit (on the device)")
    r.add_argument("--budget-s", type=float, default=540.0, help="the call's seconds, overhead included")
    r.add_argument("--spent-s", type=float, default=None, help="seconds the call spent before (install)")
    r.add_argument("--out", type=Path, required=True, help="what comes back ($OUT)")
    r.add_argument("--work", type=Path, default=Path("/tmp/ledger"), help="the jobs' own folders")
    r.add_argument("--only", nargs="+", help="only these jobs (and the gates among them)")
    r.add_argument("--var", action="append", default=[], help="NAME=VALUE overriding a ledger var")
    r.add_argument("--device-info", type=Path, help="a file naming the GPU and CPU (nvidia-smi -L, lscpu)")
    la = sub.add_parser("land", help="land what a call brought back")
    la.add_argument("files_at", type=Path)
    la.add_argument("--runs", type=Path, default=RUNS, help="where the run's page goes")
    la.add_argument("--mkdocs", type=Path, default=MKDOCS, help="the site's nav gets the page")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ledger %(levelname)s %(message)s", datefmt="%H:%M:%S")
    try:
        if a.verb == "run":
            import ledger_run

            return ledger_run.run_call(a)
        if a.verb == "land":
            import ledger_land

            print(ledger_land.land(a.files_at, a.ledger, a.records, a.runs, a.state, a.mkdocs))
            return 0
        ledger, landed = load(a.ledger), Landed.read(a.records, ROOT, a.state)
        if a.verb == "status":
            print(status_table(ledger, landed))
        else:
            chosen = plan(ledger, a.budget_s, landed, {ledger.job(n).name for n in a.only} if a.only else None)
            for job, given in chosen:
                print(f"{job.name}: {given:.0f} s ({'measured' if job.measured else 'estimate'} {job.cost_s:.0f} s)")
            if not chosen:
                print("nothing fits")
        return 0
    except LedgerError as exc:
        print(f"ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
