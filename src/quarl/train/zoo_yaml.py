"""rl-zoo3's `config.yml`, read without running code from it (quarl.train.untrusted) and within
bounds: plain YAML and the tags rl-zoo3 writes; a file over `YAML_MAX_BYTES`, or whose aliases
expand past `YAML_MAX_NODES` nodes (a "billion laughs"), is refused in one sentence, trusted or not."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

import yaml

from quarl.errors import QuarlError
from quarl.train.untrusted import TRUST_HINT, Untrusted

# Bounds on a config.yml (rl-zoo3 writes a few hundred bytes and nodes, without aliases): its size,
# and its nodes once its aliases are expanded (nine nested aliases in 560 bytes make 9^9 of them).
YAML_MAX_BYTES = 1 << 20
YAML_MAX_NODES = 100_000


class _Oversized(yaml.YAMLError):
    """A YAML document whose aliases expand past `YAML_MAX_NODES` nodes (or refer to themselves)."""


def _expanded(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """How many nodes `node` holds once its aliases are expanded, counted without expanding them
    (each shared node once, in `sizes`); `_Oversized` past `YAML_MAX_NODES` or for an alias inside itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise _Oversized("an alias refers to the node that holds it")
    open_.add(key)
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [item for pair in node.value for item in pair]
    else:
        children = []
    total = 1
    for child in children:
        total += _expanded(child, sizes, open_)
        if total > YAML_MAX_NODES:
            raise _Oversized(f"its aliases expand to more than {YAML_MAX_NODES:,} nodes")
    open_.discard(key)
    sizes[key] = total
    return total


class _Bounded(yaml.composer.Composer):
    """A loader's composer that refuses a document whose aliases expand past `YAML_MAX_NODES` nodes."""

    def compose_document(self) -> Optional[yaml.Node]:
        node = super().compose_document()
        if node is not None:
            _expanded(node, {}, set())
        return node


class _ZooLoader(_Bounded, yaml.SafeLoader):
    """PyYAML's safe loader and the tags rl-zoo3's config.yml holds, within `YAML_MAX_NODES`."""


class _TrustedLoader(_Bounded, yaml.UnsafeLoader):
    """PyYAML's unsafe loader (rl-zoo3's own), within `YAML_MAX_NODES`: trust is no licence to fill the memory."""


class _RefusedTag(yaml.YAMLError):
    def __init__(self, tag: str) -> None:
        super().__init__(tag)
        self.tag = tag


def _ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> OrderedDict[Any, Any]:
    if isinstance(node, yaml.SequenceNode):  # rl-zoo3's form: the arguments, [[key, value], ...]
        args, kwds = loader.construct_sequence(node, deep=True), {}
    elif isinstance(node, yaml.MappingNode):  # PyYAML's long form: args, kwds
        value = loader.construct_mapping(node, deep=True)
        args, kwds = value.get("args", []), value.get("kwds", {})
    else:
        args, kwds = [], {}
    return OrderedDict(*args, **kwds)


def _tuple(loader: yaml.SafeLoader, node: yaml.Node) -> tuple[Any, ...]:
    assert isinstance(node, yaml.SequenceNode)
    return tuple(loader.construct_sequence(node, deep=True))


def _undefined(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise _RefusedTag(node.tag)


_ZooLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _ordered_dict)
_ZooLoader.add_constructor("tag:yaml.org,2002:python/tuple", _tuple)
_ZooLoader.add_constructor(None, _undefined)  # type: ignore[arg-type]  # PyYAML's key for every other tag


def _shown_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


def _bounded_text(path: Path) -> str:
    """The text of `path`, refused in a sentence (QuarlError) when it is larger than `YAML_MAX_BYTES`."""
    size = path.stat().st_size
    if size > YAML_MAX_BYTES:
        raise QuarlError(
            f"{path} is {size:,} bytes, and quarl reads a config.yml of at most {YAML_MAX_BYTES:,} (rl-zoo3 writes "
            "a few kilobytes): give the config.yml saved with the model."
        )
    return path.read_text()


def read_yaml(path: Path, trust: bool = False) -> Any:
    """`path` as rl-zoo3 wrote it: plain YAML and the OrderedDict tag; with `trust`, PyYAML's unsafe
    loader (rl-zoo3's own). `Untrusted` for any other tag, QuarlError for a file too large or whose
    aliases expand too far, yaml.YAMLError for text that is no YAML."""
    text = _bounded_text(path)
    try:
        if trust:
            return yaml.load(text, Loader=_TrustedLoader)  # noqa: S506  # the user trusts this file
        return yaml.load(text, Loader=_ZooLoader)  # noqa: S506  # a SafeLoader with rl-zoo3's OrderedDict
    except _Oversized as exc:
        raise QuarlError(
            f"{path} is refused: {exc} (a config.yml rl-zoo3 writes has a few dozen, without aliases): give the "
            "config.yml saved with the model."
        ) from None
    except _RefusedTag as refused:
        raise Untrusted(
            f"{path} holds the YAML tag {_shown_tag(refused.tag)}, which can run Python code when read: quarl "
            f"reads plain YAML and rl-zoo3's OrderedDict only ({TRUST_HINT})."
        ) from None
