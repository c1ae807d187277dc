"""quarl's test suite.

It caches compiled bytecode even where PYTHONDONTWRITEBYTECODE is set, as in this machine's shells:
otherwise each xdist worker rewrites the asserts of every test module again, and every interpreter
the suite starts (SLURM jobs, scripts, Ray workers) compiles quarl's modules again."""

import os
import sys

sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes the tests start
