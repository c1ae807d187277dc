"""Each env suite's extra alone brings what the suite imports: the packages `quarl.rl.envs.SUITES`
names for a suite are installed by that extra's requirements (with theirs, transitively), or by
quarl's own where the suite needs no extra. Read from the installed metadata: no network, no venv."""

import importlib.metadata as metadata
import re

import pytest
from packaging.requirements import Requirement

from quarl.rl.envs import SUITES


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _requires(dist: str, extras: set[str]) -> list[Requirement]:
    """The requirements of installed `dist` that apply with `extras` (its base ones always)."""
    try:
        lines = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for line in lines:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            found.append(req)
    return found


def brought_by(extra: str | None) -> set[str]:
    """Every distribution quarl's `extra` installs (None: quarl's base requirements), transitively."""
    seen: set[str] = set()
    todo = [
        r
        for r in _requires("quarl", {extra} if extra else set())
        if extra is None and r.marker is None or extra is not None and r.marker is not None
    ]
    while todo:
        req = todo.pop()
        name = _name(req.name)
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.update({key, name})
        todo += _requires(req.name, set(req.extras))
    return {s for s in seen if "[" not in s}


def test_every_suite_extra_is_one_quarl_declares():
    declared = set(metadata.metadata("quarl").get_all("Provides-Extra") or [])
    assert {s.extra for s in SUITES.values() if s.extra} <= declared


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_a_suites_extra_installs_every_package_it_imports(suite):
    spec = SUITES[suite]
    installed = brought_by(spec.extra)
    providers = metadata.packages_distributions()
    for module in spec.modules:
        dists = {_name(d) for d in providers.get(module, [])}
        assert dists, f"{module} (suite {suite}) is not installed here"
        assert dists & installed, (
            f"suite {suite} imports {module} (from {sorted(dists)}), which quarl[{spec.extra or ''}] does not install"
        )


def test_the_closure_follows_extras_of_requirements():
    """gymnasium[mujoco] in the mujoco extra brings gymnasium's own mujoco requirements (imageio)."""
    assert {"gymnasium", "mujoco", "imageio"} <= brought_by("mujoco")
    assert "ale-py" not in brought_by("mujoco") and "ale-py" in brought_by("atari")
