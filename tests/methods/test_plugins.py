"""Quantization methods are plugins: the spine dispatches through the registry, each method's typed
settings compose, a new method works by adding its module, and src/quarl has no import cycle."""

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from quarl.app import CONF_DIR
from quarl.config import method_registry, schema
from quarl.config.keys import cell_key, policy_key
from quarl.config.method_registry import QuantConfig
from quarl.errors import QuarlError
from quarl.methods._integer import IntegerWeights, check_integer_weights
from quarl.quantize.weights import fake_quantize, inference_layers, quantize_policy, quantize_weights
from tests.conftest import compose_cfg

SRC = Path(method_registry.__file__).resolve().parents[2]  # the folder holding the quarl package


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The quarl modules `path` imports anywhere (module level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{a.name}" for a in node.names} & modules
            found |= submodules if len(submodules) == len(node.names) else submodules | {node.module}
    return {m for m in found if m in modules}


def test_src_quarl_has_no_import_cycle():
    files = {_module_name(p): p for p in (SRC / "quarl").rglob("*.py")}
    assert "quarl.pipeline" in files and "quarl.methods" in files
    graph = {name: _imports(path, set(files)) - {name} for name, path in files.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail[trail.index(nxt):] + [node, nxt]))
            if nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_no_module_outside_the_methods_branches_on_the_method_name():
    branch = re.compile(r"quant\.method\s*(==|!=|\bin\b|\bnot in\b)|method\s*==\s*[\"']")
    offenders = [f"{p.relative_to(SRC)}:{i}" for p in (SRC / "quarl").rglob("*.py") if "methods" not in p.parts
                 for i, line in enumerate(p.read_text().splitlines(), 1) if branch.search(line)]
    assert offenders == []
    assert len(list((SRC / "quarl").rglob("*.py"))) > 50


@pytest.mark.parametrize("name", method_registry.NAMES)
def test_every_method_has_its_config_file_and_typed_settings(name):
    assert (CONF_DIR / "quant" / f"{name}.yaml").exists()
    cfg = compose_cfg(f"quant={name}")
    assert cfg.quant.method == name
    assert OmegaConf.get_type(cfg.quant) is method_registry.get(name).config


def test_a_setting_of_another_method_is_refused_at_composition():
    with pytest.raises(ConfigCompositionException, match="act_bits"):
        compose_cfg("quant=fp16", "quant.act_bits=8")
    assert compose_cfg("quant=ptq", "quant.act_bits=8").quant.act_bits == 8


def test_an_unknown_method_names_the_field_and_the_choices():
    with pytest.raises(QuarlError, match=r"quant.method=int3 is not allowed: choose one of fp32, .*ptq"):
        method_registry.get("int3")


@dataclass
class NoisyConfig(QuantConfig):
    noise: float = 0.01


class NoisyIntegers(IntegerWeights):
    """The example of docs/methods.md, int_noise: noise on the weights (here a fixed offset), then integer
    weights; named int_offset, so that it stands beside an int_noise added as the guide says."""

    name = "int_offset"
    config = NoisyConfig
    result_keys = ("bits", "scheme", "granularity", "quantize_bias", "noise")

    def validate(self, cfg):
        check_integer_weights(cfg.quant)
        if cfg.quant.noise < 0:
            raise QuarlError(f"quant.noise={cfg.quant.noise} must be >= 0.")

    def quantize(self, model, quant, calibrate=None):
        for layer in inference_layers(model).values():
            layer.weight.add_(torch.full_like(layer.weight, quant.noise))
        quantize_weights(model, quant, lambda t, granularity, bits: fake_quantize(t, bits, quant.scheme, granularity),
                         with_bias=bool(quant.quantize_bias))


@pytest.fixture
def noisy(monkeypatch):
    method = NoisyIntegers()
    monkeypatch.setitem(method_registry.REGISTRY, method.name, method)
    schema.register()
    ConfigStore.instance().store(group="quant", name=method.name, node={"defaults": [
        f"/schema/quant/{method.name}@_here_", "_self_"]})
    yield method
    ConfigStore.instance().repo["quant"].pop(f"{method.name}.yaml")  # later compositions know it no more


def test_a_new_method_is_keyed_validated_and_applied_through_the_registry(noisy):
    cfg = compose_cfg("quant=int_offset", "quant.noise=0.5", "quant.bits=32")
    assert cell_key(cfg) != cell_key(compose_cfg("quant=int_offset", "quant.noise=0.25", "quant.bits=32"))
    assert policy_key(cfg) == policy_key(compose_cfg("quant=ptq"))  # it quantizes the shared fp32 policy
    schema.check(cfg)
    with pytest.raises(QuarlError, match="quant.noise=-1.0 must be >= 0"):
        schema.check(compose_cfg("quant=int_offset", "quant.noise=-1"))
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu")
    before = {n: layer.weight.clone() for n, layer in inference_layers(model).items()}
    quantize_policy(model, cfg.quant)  # 32 bits: the noise alone
    for name, layer in inference_layers(model).items():
        assert torch.allclose(layer.weight, before[name] + 0.5)
