"""One discovery rule for every plugin package (`quarl.config.plugins`): methods, backends and
microcontroller targets. A helper module (`_x.py`) is skipped, a module without the symbol is refused
naming it, a name registered twice is refused naming both modules; and a backend that reuses another's
runner is named, logged and recorded as registered."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

import quarl.backends
import quarl.methods
from quarl.config import backend_registry, method_registry
from quarl.deploy.edge import targets
from quarl.errors import QuarlError


def _methods() -> list[str]:
    method_registry._REGISTRY.clear()
    return list(method_registry.registry())


def _backends() -> list[str]:
    backend_registry._REGISTRY.clear()
    return list(backend_registry.registry())


def _targets() -> list[str]:
    return list(targets._discover())


#: registry -> (its plugin package, its symbol, how it is built again, a plugin module to copy)
REGISTRIES = {
    "methods": (quarl.methods, "METHODS", _methods, "floats"),
    "backends": (quarl.backends, "BACKENDS", _backends, "torch_eager"),
    "targets": (targets, "TARGET", _targets, "cortex_m4"),
}


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str, str], list[str]]]:
    """`add(registry, file name, text)`: a module beside the package's own (a folder added to its
    `__path__`; src/ is not written), then the registry built again: its names. Afterwards the
    registries are rebuilt from src/ alone and the added modules forgotten."""
    before = set(sys.modules)
    for name, (package, _, _, _) in REGISTRIES.items():
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.setattr(method_registry, "_REGISTRY", {})
    monkeypatch.setattr(backend_registry, "_REGISTRY", {})

    def add(registry: str, file: str, text: str) -> list[str]:
        (tmp_path / registry / file).write_text(text)
        return REGISTRIES[registry][2]()

    yield add
    for module in set(sys.modules) - before:
        if module.startswith("quarl."):
            parent, _, child = module.rpartition(".")
            sys.modules.pop(module)
            if hasattr(sys.modules.get(parent), child):
                delattr(sys.modules[parent], child)


EVERY = pytest.mark.parametrize("registry", list(REGISTRIES))


@EVERY
def test_a_helper_module_is_skipped(registry, plugins):
    """`_shared.py` holding `X = 1` (no symbol) broke every run (AttributeError: no attribute 'METHODS')."""
    before = REGISTRIES[registry][2]()
    assert plugins(registry, "_shared.py", "X = 1\n") == before and len(before) >= 2


@EVERY
def test_a_module_without_its_symbol_is_refused_naming_it(registry, plugins):
    package, symbol, _, _ = REGISTRIES[registry]
    with pytest.raises(QuarlError) as refused:
        plugins(registry, "extra.py", "TARGETS = 1\nX = 1\n")  # TARGET misspelt: it used to be ignored
    message = str(refused.value)
    assert message.startswith(f"Module {package.__name__}.extra defines no {symbol}: ")
    assert "_extra.py" in message and "\n" not in message


@EVERY
def test_a_name_registered_twice_is_refused_naming_both_modules(registry, plugins):
    """A copy of a plugin under another file name: it used to replace the original (targets) silently."""
    package, _, _, original = REGISTRIES[registry]
    text = (Path(package.__path__[0]) / f"{original}.py").read_text()
    with pytest.raises(QuarlError) as refused:
        plugins(registry, f"{original}_copy.py", text)
    message = str(refused.value)
    assert " is defined twice, in " in message and "\n" not in message
    assert message.endswith(f"in {package.__name__}.{original} and in {package.__name__}.{original}_copy: "
                            "rename or remove one of them.")


def test_a_symbol_of_another_type_and_a_reserved_backend_name_are_refused(plugins):
    with pytest.raises(QuarlError, match=r"^quarl\.deploy\.edge\.targets\.avr\.TARGET must be a Target, not str\.$"):
        plugins("targets", "avr.py", "TARGET = 'avr'\n")
    with pytest.raises(QuarlError, match=r"^quarl\.methods\.noisy\.METHODS must be a tuple of QuantMethods, not int"):
        plugins("methods", "noisy.py", "METHODS = 3\n")
    reserved = "from quarl.config.backend_registry import Backend\nBACKENDS = (Backend('auto', 'fp32', None, ''),)\n"
    with pytest.raises(QuarlError, match="^Backend auto of quarl.backends.mine is a reserved name: choose a name"):
        plugins("backends", "mine.py", reserved)


def test_the_methods_keep_the_baseline_first(plugins):
    names = plugins("methods", "_shared.py", "X = 1\n")
    assert names[:3] == ["fp32", "fp16", "bf16"] and {"ptq", "qat", "actorq"} <= set(names)


def test_a_backend_reusing_another_runner_is_named_as_registered(plugins, monkeypatch):
    """A plugin built on TorchRunner (as a `c_ruy` on CRunner): the runner's `backend`, which the
    pipeline logs ("Executed on ...") and records (`backend`), is its registered name."""
    from stable_baselines3 import PPO

    from quarl.deploy import execution
    from quarl.deploy.acting import acting_network

    plugins("backends", "torch_again.py", (
        "from quarl.config.backend_registry import Backend\n"
        "def build(net, example, calibrated, threads):\n"
        "    from quarl.deploy.execution import TorchRunner\n"
        "    return TorchRunner(net, 'torch')\n"
        "BACKENDS = (Backend('torch_again', 'fp32', build, 'eager PyTorch again', rank=50),)\n"
    ))
    monkeypatch.setattr(execution, "CHOICES", backend_registry.choices())
    net = acting_network(PPO("MlpPolicy", "CartPole-v1", device="cpu", seed=0))
    runner = execution.compile_network(net, "torch_again", np.zeros((1, 4), np.float32))
    assert (runner.backend, runner.precision) == ("torch_again", "fp32")
    assert "backend=torch_again" in repr(runner)
    assert execution.compile_network(net, "torch").backend == "torch"
