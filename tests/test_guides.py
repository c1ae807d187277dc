"""Each extension guide followed in-process: a throwaway plugin of each kind (a method, a backend, a
microcontroller target, an env suite, a report section, a named sweep) is added the way its guide says
(a module beside the package's own, a temporary copy of the configs, a patched list), and its registry
lists it and the checks the suite derives from the registries and folders accept it. Each runs in
seconds; what takes longer (a training, QEMU, the whole report) runs for every registered plugin in the
suite itself, where the tests are parametrized over the registries."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import jinja2
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from quarl.app import CONF_DIR
from quarl.collate.frame import is_float
from quarl.config import backend_registry, method_registry, schema
from quarl.deploy.edge import targets
from quarl.errors import QuarlError
from quarl.report import build, campaign
from quarl.report.text import TEMPLATES
from quarl.rl import envs
from quarl.rl.matrix import env_choices, env_config, matrix
from quarl.store.listing import setting_label
from quarl.store.query import float_bits
from quarl.sweeps import expand
from tests.config.test_plugin_discovery import plugins  # noqa: F401  (the fixture: modules beside quarl's own)
from tests.conftest import ROOT, compose_cfg

DOCS = ROOT / "docs"
GUIDES = [
    "methods.md",
    "adding-a-backend.md",
    "adding-a-target.md",
    "adding-an-env-suite.md",
    "adding-a-report-section.md",
    "adding-a-sweep.md",
]


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """A copy of quarl's configs to add files to (src/ is not written)."""
    return Path(shutil.copytree(CONF_DIR, tmp_path / "conf"))


@pytest.fixture
def forget_schemas() -> Iterator[None]:
    """Hydra's ConfigStore as it was: the schemas a throwaway method registers are removed afterwards."""
    schema.register()
    before = set(ConfigStore.instance().repo["schema"]["quant"])
    yield
    stored = ConfigStore.instance().repo["schema"]["quant"]
    for name in set(stored) - before:
        stored.pop(name)
    schema._registered.clear()


def test_every_guide_is_on_the_site_and_names_the_checks_it_passes():
    nav = (ROOT / "mkdocs.yml").read_text()
    for guide in GUIDES:
        text = (DOCS / guide).read_text()
        assert guide in nav and "tests/" in text, guide


METHOD = """
from quarl.config.method_registry import QuantConfig, QuantMethod


class Float8(QuantMethod):
    name = "guide_fp8"
    float_width = 8

    def node(self):
        return QuantConfig(method=self.name, bits=8)


METHODS = (Float8(),)
"""


def test_a_method_module_and_its_config_file(plugins, conf, forget_schemas):  # noqa: F811
    """docs/methods.md: the module and conf/quant/<name>.yaml; a float method is a float everywhere."""
    from tests.test_sweeps import smoke_methods

    assert "guide_fp8" in plugins("methods", "guide_fp8.py", METHOD)
    (conf / "quant" / "guide_fp8.yaml").write_text("defaults:\n  - /schema/quant/guide_fp8@_here_\n  - _self_\n")
    schema.register()
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["quant=guide_fp8"])
    assert cfg.quant.method == "guide_fp8" and OmegaConf.get_type(cfg.quant) is method_registry.QuantConfig
    schema.check(cfg)
    assert float_bits()["guide_fp8"] == 8 and is_float("guide_fp8") and setting_label("guide_fp8", 8) == "guide_fp8"
    assert "guide_fp8" in smoke_methods()[0]  # the smoke test runs it end to end


BACKEND = """
from quarl.config.backend_registry import Backend


def build(net, example, calibrated, threads):
    from quarl.deploy.execution import TorchRunner

    return TorchRunner(net, "torch_guide", "float16")


BACKENDS = (Backend("torch_guide", "fp16", build, "eager PyTorch, float16 (the guide's)", mlp_only=True, rank=60),)
"""


def test_a_backend_module(plugins, tmp_path):  # noqa: F811
    """docs/adding-a-backend.md: the module, and its line in docs/execution.md's table."""
    from tests.deploy.test_backends import test_every_backend_runs_an_evaluation_of_a_policy_it_accepts as evaluates

    assert "torch_guide" in plugins("backends", "torch_guide.py", BACKEND)
    assert "torch_guide" in schema.exec_backends() and "| `torch_guide` | fp16 |" in backend_registry.table()
    with pytest.raises(QuarlError, match="quant.backend=torch_guide runs MLP policies only"):
        schema.check(compose_cfg("env=atari/pong", "quant.backend=torch_guide"))
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu")
    model.policy.action_net.weight.data *= 100  # untrained logits are near ties: distinct actions instead
    evaluates({"ppo_cartpole": model}, tmp_path, "torch_guide")  # what the suite runs for every backend


def test_a_target_module(plugins, monkeypatch):  # noqa: F811
    """docs/adding-a-target.md: a copy of the Cortex-M4's module under a new name, and its row in
    docs/edge.md's table."""
    from tests.deploy.edge import test_targets

    text = (Path(targets.__file__).parent / "cortex_m4.py").read_text().replace('name="cortex-m4"', 'name="guide-m4"')
    plugins("targets", "guide_m4.py", text)
    found = targets._discover()
    monkeypatch.setattr(targets, "TARGETS", found)
    monkeypatch.setattr(test_targets, "TARGETS", found)
    assert "guide-m4" in found and targets.target("guide-m4").cc == found["cortex-m4"].cc
    test_targets.test_every_target_module_is_registered_and_an_unknown_name_lists_them()
    test_targets.test_a_missing_tool_is_one_sentence_naming_the_debian_packages(found["guide-m4"], monkeypatch)
    edge = (DOCS / "edge.md").read_text()
    with pytest.raises(AssertionError):
        test_targets.check_docs_rows(edge)
    row = next(line for line in edge.splitlines() if line.startswith("| `cortex-m4` |"))
    test_targets.check_docs_rows(edge.replace(row, f"{row}\n{row.replace('`cortex-m4`', '`guide-m4`')}"))


def test_an_env_suite(conf, monkeypatch):
    """docs/adding-an-env-suite.md: its entry in SUITES and its env configs in conf/env/<suite>/."""
    from tests.rl import test_envs

    monkeypatch.setitem(envs.SUITES, "toy", envs.Suite((), None))
    (conf / "env" / "toy").mkdir()
    text = (conf / "env" / "cartpole.yaml").read_text().replace("name: cartpole", "name: toy/cartpole\nsuite: toy")
    (conf / "env" / "toy" / "cartpole.yaml").write_text(text)
    assert {env_config(conf, choice).suite for choice in env_choices(conf)} == set(envs.SUITES)  # as `quarl matrix`
    table = matrix(conf, suite="toy").set_index("env")
    assert list(table.index) == ["toy/cartpole"] and table.loc["toy/cartpole", "ppo"] == "default"
    env = envs.make_env(env_config(conf, "toy/cartpole"))
    assert env.observation_space.contains(env.reset(seed=0)[0])
    env.close()
    monkeypatch.setattr(test_envs, "CONF_DIR", conf)
    monkeypatch.setattr(test_envs, "ENVS", env_choices(conf))
    assert test_envs.suite_run("toy") == ["algo=dqn", "env=toy/cartpole"]  # its tiny PTQ run in the suite


def test_a_report_section(tmp_path, monkeypatch, caplog):
    """docs/adding-a-report-section.md: a template, the function that fills it, its line in SECTIONS."""
    from tests.report.test_reproduction import section_steps
    from tests.report.test_templates import typed_numbers

    (tmp_path / "guide.md").write_text("The guide's section counts {{ counted(n, 'record') }}.")
    monkeypatch.setattr(TEMPLATES, "loader", jinja2.ChoiceLoader([jinja2.FileSystemLoader(tmp_path), TEMPLATES.loader]))
    assert typed_numbers((tmp_path / "guide.md").read_text()) == []

    def guide(inputs: campaign.Inputs) -> str:
        return "## The guide's section\n\n" + build.note("guide", n=inputs.files)

    sweeps = next(s for s in build.SECTIONS if s.doing == "the named sweeps")
    monkeypatch.setattr(build, "SECTIONS", [build.Section("the guide's section", guide), sweeps])
    empty = campaign.Campaign(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    inputs = campaign.Inputs(empty, tmp_path, CONF_DIR / "sweep", {}, False, 3, 0)
    monkeypatch.setattr(campaign.Inputs, "read", classmethod(lambda cls, *args: inputs))
    with caplog.at_level("INFO", logger="quarl.progress"):
        report = build.build(tmp_path, tmp_path, CONF_DIR / "sweep", figures=False)
    steps = [r.getMessage() for r in caplog.records if r.name == "quarl.progress"]
    assert steps[1:-1] == section_steps()  # test_committed_report_matches_the_committed_records' count
    assert "## The guide's section\n\nThe guide's section counts three records." in report


def test_a_named_sweep(conf):
    """docs/adding-a-sweep.md: the file, its rows in docs/sweeps.md and conf/sweep/README.md, the
    README's count; the report lists it with its command."""
    from tests.test_sweeps import check_named_sweeps, sweep_table

    smoke = (conf / "sweep" / "smoke.yaml").read_text()
    (conf / "sweep" / "guide_smoke.yaml").write_text(smoke.replace("+sweep=smoke", "+sweep=guide_smoke"))
    docs, listing = (DOCS / "sweeps.md").read_text(), (conf / "sweep" / "README.md").read_text()
    readme = (ROOT / "README.md").read_text()
    named = len(sweep_table(listing))
    with pytest.raises(AssertionError):
        check_named_sweeps(conf, docs, listing, readme)
    cells = len(expand(conf, ["+sweep=guide_smoke"]))
    docs = docs.replace("| `smoke` |", f"| `guide_smoke` | {cells} | 1 | a copy | minutes |\n| `smoke` |")
    listing = listing.replace("| `smoke` |", "| `guide_smoke` | a copy of smoke |\n| `smoke` |")
    check_named_sweeps(conf, docs, listing, readme.replace(f"all {named} (", f"all {named + 1} ("))
    listed = build.not_run_here(conf / "sweep", pd.DataFrame())
    assert "| `guide_smoke` | 0 |" in listed and "`python run.py -m +sweep=guide_smoke`" in listed


def test_the_throwaway_plugins_are_gone_afterwards():
    """The fixtures restore the registries: nothing above leaks into the other tests of this process."""
    assert "guide_fp8" not in method_registry.registry() and "torch_guide" not in backend_registry.registry()
    assert "guide-m4" not in targets.TARGETS and "toy" not in envs.SUITES
    assert "the guide's section" not in [s.doing for s in build.SECTIONS]
