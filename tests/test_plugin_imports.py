"""Nothing imports a plugin but its registry (docs/layout.md): the method plugins (`quarl.methods`,
found by `quarl.config.method_registry`), the backends (`quarl.backends`, by
`quarl.config.backend_registry`) and the microcontroller targets (`quarl.deploy.edge.targets.<name>`,
by the package's own `__init__`, which is their registry). Inside a plugin package a module may
import the package itself and its helpers (`_x`), never another plugin; outside it, only the
targets' registry may be imported. Every form counts: `import a.b`, `from a import b`, `from a.b
import C`, relative imports, and `importlib.import_module("a.b")` with a literal name, at module
level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import quarl

PACKAGE = Path(quarl.__file__).resolve().parent
#: plugin package -> its registry (the one module that imports its plugins)
REGISTRIES = {
    "quarl.methods": "quarl.config.method_registry",
    "quarl.backends": "quarl.config.backend_registry",
    "quarl.deploy.edge.targets": "quarl.deploy.edge.targets",
}


def _name(path: Path) -> str:
    """The dotted module name of a file under src/quarl."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p) for p in PACKAGE.rglob("*.py")}


def _base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of `level` dots in `module` starts from."""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    return ".".join(parts[: len(parts) - (level - 1)])


def imported(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every quarl module `source` (the text of `module`) imports, by full name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(p for p in (_base(module, is_package, node.level), base) if p)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return {m for m in found if m == "quarl" or m.startswith("quarl.")}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def _helper(name: str, package: str) -> bool:
    return name != package and name[len(package) + 1 :].split(".")[0].startswith("_")


def refused(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of `module` the rule refuses, as 'module imports name'."""
    bad = []
    for name in sorted(imported(source, module, is_package)):
        for package, registry in REGISTRIES.items():
            if not _within(name, package) or module == registry:
                continue
            if _within(module, package):  # a plugin or a helper: the package itself and its helpers only
                allowed = name == package or _helper(name, package)
            else:  # elsewhere: the registry only, where the package is it (the targets)
                allowed = name == package == registry
            if not allowed:
                bad.append(f"{module} imports {name}")
    return bad


def test_nothing_imports_a_plugin_but_its_registry():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        violations += refused(path.read_text(), _name(path), path.name == "__init__.py")
    assert violations == []
    assert len(MODULES) > 100 and {"quarl.methods.ptq", "quarl.backends.full_integer"} <= MODULES


@pytest.mark.parametrize(
    "source, module",
    [
        ("from quarl.methods.ptq import PTQ", "quarl.pipeline"),
        ("import quarl.methods.ptq", "quarl.report.build"),
        ("from quarl.methods import ptq", "quarl.collate.plots"),
        ("from quarl import methods", "quarl.cli"),
        ("def f():\n    from quarl.methods._integer import IntegerWeights", "quarl.pipeline"),
        ("import importlib\nimportlib.import_module('quarl.methods.qat')", "quarl.sweeps"),
        ("from quarl.methods.ptq import PTQ", "quarl.methods.qat"),
        ("from .ptq import PTQ", "quarl.methods.qat"),
        ("from quarl.backends.full_integer import builder", "quarl.deploy.execution"),
        ("from quarl.deploy.edge.targets import cortex_m4", "quarl.deploy.edge.export"),
        ("from quarl.deploy.edge.targets._firmware import run", "quarl.deploy.edge.toolchain"),
        ("from . import cortex_m4", "quarl.deploy.edge.targets._firmware"),
    ],
)
def test_each_form_of_importing_a_plugin_is_refused(source, module):
    assert refused(source, module) != []


@pytest.mark.parametrize(
    "source, module, is_package",
    [
        ("from quarl.methods._integer import IntegerWeights", "quarl.methods.qat", False),
        ("from . import _integer", "quarl.methods.ptq", False),
        ("from quarl.config.method_registry import QuantMethod", "quarl.methods.ptq", False),
        ("importlib.import_module('quarl.methods.ptq')", "quarl.config.method_registry", False),
        ("from quarl.deploy.edge.targets import TARGETS", "quarl.deploy.edge.export", False),
        ("from quarl.deploy.edge import targets", "quarl.deploy.edge.toolchain", False),
        ("from quarl.deploy.edge.targets import Target", "quarl.deploy.edge.targets.riscv32", False),
        ("from quarl.deploy.edge.targets import _firmware", "quarl.deploy.edge.targets", True),
    ],
)
def test_the_registry_plugins_own_helpers_and_the_targets_registry_are_allowed(source, module, is_package):
    assert refused(source, module, is_package) == []
