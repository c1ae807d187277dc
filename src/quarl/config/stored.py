"""A stored config's values checked against the types the config schema gives them: a record read
back (`quarl rebuild`) is believed only when its `seed` is an integer, its `quant.bits` an integer,
its `policy.trust` true or false, and so on."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import typing
from typing import Any, Optional

from quarl.config import method_registry
from quarl.config.schema import RunConfig


@functools.cache
def _hints(schema: type) -> dict[str, Any]:
    """A settings dataclass's type hints (get_type_hints evaluates every annotation anew)."""
    return typing.get_type_hints(schema)


#: What a stored (JSON) value of a schema type must be, and how that is said.
_STORED_TYPES: dict[Any, tuple[Any, str]] = {
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number"),
    str: (lambda v: isinstance(v, str), "text"),
    dict: (lambda v: isinstance(v, dict), "a mapping"),
    list: (lambda v: isinstance(v, list), "a list"),
}


def _stored_value_problem(value: Any, hint: Any, key: str) -> Optional[str]:
    """What is wrong with the stored `value` of the setting `key`, typed `hint`, or None."""
    if typing.get_origin(hint) is typing.Union:  # Optional[X]: the schemas hold no other unions
        if value is None:
            return None if type(None) in typing.get_args(hint) else f"{key} is null"
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return (
            _stored_problem(value, hint, f"{key}.") if isinstance(value, dict) else f"{key} is not a group of settings"
        )
    check, expected = _STORED_TYPES.get(typing.get_origin(hint) or hint, (None, ""))
    if check is None or check(value):
        return None
    return f"{key} is {json.dumps(value)[:40]}, not {expected}"


def _stored_problem(node: dict[str, Any], schema: type, prefix: str) -> Optional[str]:
    """The first setting of `node` whose stored value is not of the type `schema` gives it, in words, or None."""
    hints = _hints(schema)
    for key, value in node.items():
        problem = _stored_value_problem(value, hints[key], f"{prefix}{key}") if key in hints else None
        if problem is not None:
            return problem
    return None


def stored_config_problem(config: dict[str, Any]) -> Optional[str]:
    """What keeps a stored config (a record's, as JSON values) from being one this quarl's schema
    types, in words ("seed is \"zero\", not an integer"), or None. Keys the schema does not know (a
    record of another quarl version) and a quant method this quarl lacks are not checked."""
    problem = _stored_problem(config, RunConfig, "")
    quant = config.get("quant")
    if problem is None and isinstance(quant, dict) and quant.get("method") in method_registry.registry():
        problem = _stored_problem(quant, method_registry.get(quant["method"]).config, "quant.")
    return problem
