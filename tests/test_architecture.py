"""The package's folders are its architecture: every import runs down the floors defined here, never
back up (a lazy import inside a function counts too), and the top level holds only entry points,
one-cell orchestration and two shared utilities."""

import ast
from pathlib import Path

import quarl

PACKAGE = Path(quarl.__file__).resolve().parent
#: Each subpackage's floor: a module may import its own floor and the floors below, nothing above.
#: The method plugins sit on top of what they use; nothing imports them but the registry, by name
#: (tests/test_plugin_imports.py guards that, for the backends and the targets too).
FLOORS = {
    "errors": 0, "progress": 0, "__init__": 0,
    "config": 1,
    "rl": 2,
    "quantize": 3,
    "deploy": 4, "backends": 4,
    "evaluate": 5,
    "store": 6,
    "train": 7,
    "actorq": 8,
    "methods": 9,
    "collate": 10,
    "report": 11,
    "sensitivity": 12, "sweeps": 12, "pipeline": 12,
    "app": 13, "cli": 14,
}
TOP_LEVEL = {"__init__", "app", "cli", "pipeline", "sweeps", "errors", "progress"}


def _room(module: str) -> str:
    """The floor key of a dotted module inside quarl ('quarl.train.cache' -> 'train')."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "quarl":
            if node.module == "quarl":
                found.update(f"quarl.{a.name}" for a in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "quarl")
    return found


def test_every_import_runs_down_the_floors():
    climbs = []
    for path in PACKAGE.rglob("*.py"):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert room in FLOORS, f"{room} has no floor: add it to FLOORS"
        for module in _imports(path):
            target = _room(module)
            if target in FLOORS and FLOORS[target] > FLOORS[room]:
                climbs.append(f"{path.relative_to(PACKAGE)} imports {module} ({room} {FLOORS[room]} < {target} "
                              f"{FLOORS[target]})")
    assert climbs == []


def test_the_top_level_holds_entry_points_and_orchestration_only():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL and len(top) <= 8


def test_no_module_is_over_450_lines():
    lines = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in lines.items() if n > 450} == {}


def test_the_command_line_starts_without_torch():
    """`quarl status`, `quarl results` and the other read commands parse their arguments without
    importing torch or SB3 (about 1.5 s of a 2.4 s `quarl status`): the commands that need them
    import them where they run."""
    import subprocess
    import sys

    code = "import sys, quarl.cli; quarl.cli.parser(); print(sorted({'torch', 'stable_baselines3'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _private_imports(path: Path) -> list[str]:
    """'module.name' for each `_name` imported from another quarl module; a package importing its
    own helper module (`from quarl.deploy.edge.targets import _firmware` inside that package) is its
    own business."""
    found, modules = [], {}  # modules: the local names bound to quarl modules
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "quarl":
            for alias in node.names:
                target = PACKAGE.parent / node.module.replace(".", "/") / alias.name
                if target.with_suffix(".py").is_file() or target.is_dir():
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                own_helper = node.module == package and target.with_suffix(".py").is_file()
                if private and not own_helper:
                    found.append(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):  # module.private_name, through a name bound to another quarl module
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            module = modules[node.value.id]
            if node.attr.startswith("_") and not node.attr.startswith("__") and module.rsplit(".", 1)[0] != package:
                found.append(f"{module}.{node.attr}")
    return found


def test_no_private_name_is_imported_from_another_module():
    """A name one module needs from another is public there: `_name` stays inside its module."""
    modules = sorted(PACKAGE.rglob("*.py"))
    crossing = {str(path.relative_to(PACKAGE)): names for path in modules if (names := _private_imports(path))}
    assert crossing == {}
