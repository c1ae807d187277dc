"""Every `quarl.<dotted.name>` a docstring of src/quarl names exists: a module, or an object reached from
the longest importable module prefix by getattr (`quarl.config.keys.policy_key`, `quarl.rl.algos.ALGOS`).
Docstrings are the string statements of a module, class or function (theirs, and an attribute's after its
assignment) and Sphinx's `#:` comments; a name counts backticked or not, and a trailing `()` or punctuation
is not part of it. Paths (`src/quarl/methods/ptq.py`) and config keys (`quant.bits`) are not dotted names."""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import quarl

PACKAGE = Path(quarl.__file__).resolve().parent
# `quarl.` then identifiers joined by dots, not inside a path, a longer name or a file name
NAME = re.compile(r"(?<![\w./\\-])quarl(?:\.[A-Za-z_]\w*)+(?![\w/\\-])")


def docstring_names(source: str) -> list[tuple[int, str]]:
    """(line, name) for each `quarl.` dotted name in the docstrings and `#:` comments of `source`, in order."""
    texts = [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    texts += [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT and t.string.startswith("#:")]
    found = []
    for line, text in sorted(texts):
        found += [(line + text.count("\n", 0, m.start()), m.group()) for m in NAME.finditer(text)]
    return found


@cache
def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute path from the longest importable module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # no such module: a shorter prefix, and getattr for the rest
            raise  # the module exists, and a package it needs is missing: say so, not "dead"
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_docstring_name_finder():
    source = '''"""See `quarl.rl.envs.make_env()`, quarl.config.keys.policy_key, and quarl.rl.algos.

    Not names: src/quarl/methods/ptq.py, conf/hydra/help/quarl.yaml, quant.bits, myquarl.x."""
#: what `quarl.store.flags.flags` marks
FLAGS = {}  # a plain comment: quarl.not.read
def f():
    """Returns quarl.store.query.runs."""
    text = "a string, not a docstring: quarl.not.read"
'''
    assert docstring_names(source) == [
        (1, "quarl.rl.envs.make_env"),
        (1, "quarl.config.keys.policy_key"),
        (1, "quarl.rl.algos"),
        (4, "quarl.store.flags.flags"),
        (7, "quarl.store.query.runs"),
    ]
    assert resolves("quarl.rl.algos.ALGOS") and resolves("quarl.config")
    assert resolves("quarl.config.schema.AlgoConfig.policy")  # a dataclass field's default
    assert not resolves("quarl.rl.envs.fp32_flag") and not resolves("quarl.no_such_module.x")


def test_every_dotted_name_in_a_docstring_resolves():
    dead = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, name in docstring_names(path.read_text()):
            if not resolves(name):
                dead.append(f"{path.relative_to(PACKAGE.parent.parent)}:{line}: {name}")
    assert not dead, "docstrings name objects that do not exist:\n  " + "\n  ".join(dead)
