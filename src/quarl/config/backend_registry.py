"""What an execution backend is (`quant.backend`, `compile_policy`), and the registry of them.

A backend is one module in `quarl.backends` (the plugins) listing its `Backend`s in `BACKENDS`,
found when the registry is built (docs/adding-a-backend.md). A `Backend` says its name, the
precision it executes, which policies it accepts (integer methods of at most `max_bits` weights,
MLPs only), whether `auto` weighs it, whether its activation ranges come from calibration states,
the export format it gives `quarl export`, and how it builds a `Runner`. Backend modules stay light
at import: their `build` imports what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from quarl.config.plugins import discover
from quarl.errors import QuarlError

PLUGINS = "quarl.backends"  # the package whose modules are the backends
#: A builder: (acting network, example observations, whether they are calibration states, threads)
#: -> a quarl.deploy Runner.
Build = Callable[[Any, Any, bool, int], Any]


@dataclass(frozen=True)
class Backend:
    """One execution backend."""

    name: str  # quant.backend=<name>
    precision: str  # what it executes: fp32, fp16, bf16, int8, int4, int2, 16x8
    build: Build
    summary: str  # one line: how it runs (the docs' table)
    max_bits: Optional[int] = None  # executes integer methods' policies of at most this many weight bits only
    mlp_only: bool = False  # refuses CNN policies (image observations)
    auto: bool = False  # a low-precision candidate quant.backend=auto weighs against fp32
    calibrated: bool = False  # activation ranges from the fp32 policy's visited states (full-integer)
    export_format: Optional[str] = None  # what `quarl export --format` calls the file it writes
    export_summary: str = ""  # what that file is (`quarl export --help`)
    rank: int = 100  # where it is listed (choices, docs): lower first, then by name
    formats: tuple[str, ...] = ()  # runs cells whose weights are in one of these number formats only (quant.format)

    def accepts(self, integer: bool, bits: int, number_format: str = "int") -> bool:
        """Whether it executes a policy of an (integer or float) method at `bits` weight bits, its
        weights in `number_format` (quant.format; `int` for the integer quantizer and float methods)."""
        if self.formats:
            return number_format in self.formats
        return number_format == "int" and (self.max_bits is None or (integer and bits <= self.max_bits))


def _discover() -> dict[str, Backend]:
    """Every backend of every plugin module (`quarl.config.plugins`), listed by rank, then name."""
    found = discover(PLUGINS, "BACKENDS", Backend, reserved=("fake", "auto"))
    return dict(sorted(found.items(), key=lambda item: (item[1].rank, item[0])))


_REGISTRY: dict[str, Backend] = {}


def registry() -> dict[str, Backend]:
    """Every backend by name, the plugins imported on first use."""
    if not _REGISTRY:
        _REGISTRY.update(_discover())
    return _REGISTRY


def get(name: str) -> Backend:
    """The backend called `name`."""
    if name not in registry():
        raise QuarlError(f"backend={name} is not known: choose one of {', '.join(('auto', *registry()))}.")
    return registry()[name]


def choices() -> tuple[str, ...]:
    """quant.backend's values that execute the policy: auto, then every backend."""
    return ("auto", *registry())


def export_formats() -> tuple[str, ...]:
    """`quarl export --format`'s choices: onnx first (the default), then what the backends export."""
    formats = {b.export_format for b in registry().values() if b.export_format}
    return tuple(sorted(formats, key=lambda f: (f != "onnx", f)))


def export_help() -> str:
    """`quarl export --format`'s help: each format and what it writes."""
    written = {b.export_format: b.export_summary for b in registry().values() if b.export_format and b.export_summary}
    return "; ".join(f"{f}{' (default)' if f == 'onnx' else ''}: {written[f]}" for f in export_formats())


def integer_formats() -> str:
    """The export formats that write a full-integer policy, as prose ('c or tflite')."""
    return " or ".join(f for f in export_formats() if f != "onnx")


def table() -> str:
    """The backends as the Markdown table docs/execution.md shows (a test keeps the two equal)."""
    rows = ["| backend | precision | runs | accepts | `quarl export --format` |", "| --- | --- | --- | --- | --- |"]
    for b in registry().values():
        accepts = [f"integer policies, ≤ {b.max_bits}-bit weights"] if b.max_bits else []
        accepts += [" or ".join(f"`quant.format={f}` cells" for f in b.formats)] if b.formats else []
        accepts += ["MLPs only"] if b.mlp_only else []
        kind = "; ".join(accepts) or "any policy"
        rows.append(f"| `{b.name}` | {b.precision} | {b.summary} | {kind} | {b.export_format or ''} |")
    return "\n".join(rows)
