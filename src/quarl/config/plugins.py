"""The one rule every plugin package follows: methods (`quarl.methods`, `METHODS`), backends
(`quarl.backends`, `BACKENDS`) and microcontroller targets (`quarl.deploy.edge.targets`, `TARGET`).

Each module of the package is a plugin and defines the symbol; a module whose name starts with `_`
is a helper the plugins share, and is not read. A plugin without the symbol, or a name registered
twice, is refused in one sentence naming the modules. Nothing but the registry imports a plugin
(tests/test_plugin_imports.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Optional, Protocol, TypeVar

from quarl.errors import QuarlError


class Named(Protocol):
    """What a plugin registers: something with a name (a QuantMethod, a Backend, a Target)."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def plugin_modules(package: str, first: Optional[str] = None) -> list[str]:
    """The plugin modules of `package` by full name, helpers (`_x`) left out, in name order
    (`first` before the others)."""
    path = importlib.import_module(package).__path__
    plugins = (m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))
    names = sorted(plugins, key=lambda n: (n != first, n))
    return [f"{package}.{name}" for name in names]


def _items(module: str, symbol: str, value: Any, kind: type[T], one: bool) -> tuple[T, ...]:
    """What `module` registers under `symbol`: one `kind`, or (not `one`) a tuple of them."""
    items = (value,) if one else value
    if not isinstance(items, (tuple, list)) or not all(isinstance(item, kind) for item in items):
        what = f"a {kind.__name__}" if one else f"a tuple of {kind.__name__}s"
        raise QuarlError(f"{module}.{symbol} must be {what}, not {type(value).__name__}.")
    return tuple(items)


def discover(
    package: str,
    symbol: str,
    kind: type[T],
    one: bool = False,
    first: Optional[str] = None,
    reserved: tuple[str, ...] = (),
) -> dict[str, T]:
    """Every `kind` the plugin modules of `package` register under `symbol` (one with `one`, else a
    tuple), by its `name`, in module order (`first` first; see `plugin_modules`).

    Raises:
        QuarlError: a plugin module without `symbol` (naming the module and the symbol), a value of
            another type, a name registered twice (naming both modules) or one of `reserved`.
    """
    found: dict[str, T] = {}
    where: dict[str, str] = {}
    noun = kind.__name__
    for module in plugin_modules(package, first):
        loaded = importlib.import_module(module)
        if not hasattr(loaded, symbol):
            helper = module.rsplit(".", 1)[-1]
            raise QuarlError(
                f"Module {module} defines no {symbol}: a {noun} module must define {symbol}, or be named "
                f"_{helper}.py to be a helper the others import."
            )
        for item in _items(module, symbol, getattr(loaded, symbol), kind, one):
            name = item.name
            if name in reserved:
                choose = ", ".join(reserved)
                raise QuarlError(f"{noun} {name} of {module} is a reserved name: choose a name other than {choose}.")
            if name in where:
                raise QuarlError(
                    f"{noun} {name} is defined twice, in {where[name]} and in {module}: rename or remove one of them."
                )
            found[name], where[name] = item, module
    return found
