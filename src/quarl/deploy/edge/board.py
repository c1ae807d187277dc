"""The Cortex-M4 board program under its former names: the target lives in
`quarl.deploy.edge.targets.cortex_m4`, the firmware every target shares in `targets._firmware`."""

from __future__ import annotations

from quarl.deploy.edge.targets._firmware import CHECK_MAIN, states_header
from quarl.deploy.edge.targets.cortex_m4 import CFLAGS, CPU, LINK, LINKER_SCRIPT, MACHINE, STARTUP, TARGET

MAIN = CHECK_MAIN.replace("/*PRELUDE*/", TARGET.main_prelude).replace("/*INIT*/", TARGET.main_init)

__all__ = ["CFLAGS", "CPU", "LINK", "LINKER_SCRIPT", "MACHINE", "MAIN", "STARTUP", "states_header"]
