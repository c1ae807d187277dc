"""Config nodes as plain Python dicts, typed for the code that reads them."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import OmegaConf


def as_dict(node: Any) -> dict[str, Any]:
    """`node` (an OmegaConf mapping node, or a plain mapping) as a plain dict, interpolations resolved."""
    if OmegaConf.is_config(node):
        # OmegaConf types the container of any node (list, dict, ...); a mapping node's is a dict
        return cast(dict[str, Any], OmegaConf.to_container(node, resolve=True))
    return dict(node)
