"""Export a quarl policy's full-integer form: a LiteRT model (`.tflite`) or a C99 policy (`policy.c`
and `policy.h`), each checked bit for bit against the integer reference before it is kept.

    from quarl.deploy.edge.export import export_edge
    report = export_edge(model, "policy.tflite", "tflite", obs_transform=vecnormalize,
                         calibration_obs=states, check_obs=recorded_states)
    print(report.text())

`quarl export --format tflite|c` calls it with the record's own calibration states
(`quarl.deploy.edge.calibration_states`). A C export also builds the policy into the minimal
firmware of every microcontroller target whose toolchain and emulator are installed
(`quarl.deploy.edge.targets`), checks its actions under QEMU and reports its linked flash and RAM and
its executed instructions per action (an instruction is not a cycle).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.config import backend_registry
from quarl.deploy.acting import ObsTransform, acting_network
from quarl.deploy.edge.calibrate import calibration_states
from quarl.deploy.edge.convert import integer_policy
from quarl.deploy.edge.integer import WEIGHT_CODINGS, IntegerPolicy
from quarl.deploy.edge.stages import check_model
from quarl.deploy.onnx_export import check_new, write_new
from quarl.errors import QuarlError

log = logging.getLogger(__name__)

FORMATS = ("tflite", "c")
PRECISIONS = {"int8": 8, "int4": 4, "int2": 2}  # C: packed weights; LiteRT: int8 only
ACTIVATIONS = {"int8": 8, "int16": 16}  # TFLite's int8 scheme, or its 16x8 scheme (8-bit weights)
FIRMWARE_CHECK_STATES = 300  # states a C export checks under each target's emulator (spread over the checked ones)
FIRMWARE_COUNT_STATES = 4  # states its executed instructions per action are counted over
MEASURES = "measures.json"  # what a C export checked and measured, beside its sources, for scripts and the report


@dataclass
class EdgeExport:
    """What an edge export wrote and what it checked."""

    paths: list[Path]
    policy: IntegerPolicy
    checked: dict[str, int] = field(default_factory=dict)  # target -> states whose action differs (0: exact)
    states: int = 0  # states checked on
    probes: int = 0  # extreme probes checked on beside them (±inf, NaN, huge values: `extreme_probes`)
    sizes: dict[str, int] = field(default_factory=dict)  # flash / RAM / arena / file bytes
    notes: list[str] = field(default_factory=list)  # a target that was not checked, and why
    checked_on: dict[str, int] = field(default_factory=dict)  # target -> states, where not `states`
    firmware: dict[str, dict[str, Any]] = field(default_factory=dict)  # microcontroller target -> measures

    def measures(self, metadata: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """What `text` says, as plain values: the checks, the sizes and each target's firmware
        measures, with the export's origin (`metadata`)."""
        return {
            "measured_on": time.strftime("%Y-%m-%d", time.gmtime()),
            "origin": {k: str(v) for k, v in (metadata or {}).items()},
            "checked": self.checked,
            "states": self.states,
            "probes": self.probes,
            "sizes": self.sizes,
            "firmware": self.firmware,
            "notes": self.notes,
        }

    def text(self) -> str:
        """The lines `quarl export` prints: the files, the checks, the sizes."""
        lines = [str(p) for p in self.paths]
        lines += [f"  {line}" for line in self.policy.describe().splitlines()]
        for target, bad in self.checked.items():
            verdict = "identical" if bad == 0 else f"DIFFERENT on {bad}"
            n = self.checked_on.get(target, self.states)
            probes = f" and {self.probes} extreme probes" if self.probes else ""
            lines.append(f"  {target}: actions {verdict} to the integer reference on {n} states{probes}")
        lines += [f"  {k}: {v} bytes" for k, v in self.sizes.items()]
        for name, m in self.firmware.items():
            lines.append(
                f"  {name} firmware ({m['float']}): the policy takes {m['flash']:,} B flash and {m['ram']:,} B RAM "
                f"(linked, with it minus without it; RAM with policy_act's stack); {m['instructions']:,.0f} "
                f"instructions per action under QEMU over {m['counted']} states (an instruction is not a cycle)"
            )
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)


def check_options(fmt: str, precision: str, activations: str, weight_coding: str) -> None:
    """Refuse an edge format, precision, activations and weight coding that do not go together."""
    if fmt not in FORMATS:
        raise QuarlError(f"format={fmt} is not an edge format: choose one of {', '.join(FORMATS)}.")
    if precision not in PRECISIONS or (fmt == "tflite" and precision != "int8"):
        allowed = "int8" if fmt == "tflite" else ", ".join(PRECISIONS)
        raise QuarlError(f"precision={precision} is not supported for format={fmt}: choose {allowed}.")
    if activations not in ACTIVATIONS:
        raise QuarlError(f"activations={activations} is not supported: choose one of {', '.join(ACTIVATIONS)}.")
    if weight_coding not in WEIGHT_CODINGS or (fmt == "tflite" and weight_coding != "packed"):
        allowed = "packed" if fmt == "tflite" else ", ".join(WEIGHT_CODINGS)
        raise QuarlError(f"weight_coding={weight_coding} is not supported for format={fmt}: choose {allowed}.")
    if activations == "int16" and precision != "int8":
        raise QuarlError(f"activations=int16 takes int8 weights (TFLite's 16x8 scheme), not precision={precision}.")


def check_flags(fmt: str, precision: Optional[str], activations: str, weight_coding: str) -> None:
    """`quarl export`'s flags that do not go together, refused before any record is read, any policy
    loaded or any warning given: --activations and --weight-coding choose the full-integer formats',
    and those formats' own pairs (`check_options`; without --precision the record's own, checked later)."""
    if fmt not in FORMATS:
        if activations != "int8":
            formats = backend_registry.integer_formats()
            raise QuarlError(f"--activations chooses the full-integer formats' activations: use --format {formats}.")
        if weight_coding != "packed":
            raise QuarlError("--weight-coding chooses how the C policy stores its weights: use --format c.")
        return
    check_options(fmt, precision or "int8", activations, weight_coding)


def export_edge(
    model: BaseAlgorithm,
    path: Union[str, Path],
    fmt: str = "tflite",
    obs_transform: ObsTransform = None,
    calibration_obs: Optional[np.ndarray] = None,
    statistic: str = "minmax",
    precision: str = "int8",
    rounding: str = "gemmlowp",
    check_obs: Optional[np.ndarray] = None,
    metadata: Optional[dict[str, Any]] = None,
    activations: str = "int8",
    weight_coding: str = "packed",
) -> EdgeExport:
    """Write the full-integer policy of `model` and check it.

    Args:
        model: an SB3 MLP policy (fp32, PTQ-quantized in place, or QAT).
        path: "tflite": a new file ending in .tflite; "c": a new folder that receives policy.c and
            policy.h. An existing path is refused; nothing is left behind when a check fails.
        fmt: "tflite" or "c".
        obs_transform: the policy's VecNormalize (folded into the exported policy).
        calibration_obs: calibration states (`calibration_states`) for every activation range the
            record does not carry.
        statistic: "minmax" or "percentile" (the record's quant.calibration).
        precision: "int8", or for "c" "int4" / "int2" (weights packed two / four to a byte).
        rounding: the C policy's requantization rounding (`fixedpoint.ROUNDINGS`; default gemmlowp's,
            as TFLite Micro). A .tflite file holds no rounding: each runtime is checked in its own.
        check_obs: recorded states to compare the targets with the reference on (default: the
            calibration states).
        metadata: stored in the .tflite file's "quarl" metadata, and as the first comment of the C
            sources (e.g. the env id and a record's `quarl.deploy.onnx_export.provenance`).
        activations: "int8" (TFLite's int8 scheme) or "int16" (its 16x8 scheme, int8 weights only).
        weight_coding: "c" only: "packed" (each weight in `precision`'s bits, read directly) or
            "huffman" (one canonical Huffman stream of the weights and shifts, decoded as the
            policy runs: the smallest flash, a slower call; `cpairs`, `cstream`).

    Raises:
        QuarlError: bad format, precision or path; a policy without an integer form; a missing
            package or toolchain (naming it); a target whose actions differ from the reference.
    """
    check_options(fmt, precision, activations, weight_coding)
    path = Path(path)
    if fmt == "tflite" and path.suffix != ".tflite":
        raise QuarlError(f"Export path {path} must end in .tflite.")
    check_new(path)
    check_model(model)
    net = acting_network(model, obs_transform)
    policy = integer_policy(
        net,
        calibration_obs,
        statistic,
        PRECISIONS[precision],
        rounding=rounding,
        activation_bits=ACTIVATIONS[activations],
    )
    policy = dataclasses.replace(policy, weight_coding=weight_coding)
    states = np.asarray(check_obs if check_obs is not None else calibration_obs)
    probes = extreme_probes(states[0]) if states.ndim > 1 and len(states) else states[:0]
    if fmt == "tflite":
        return _export_tflite(policy, path, states, probes, metadata)
    return _export_c(policy, path, states, probes, metadata)


def _export_tflite(
    policy: IntegerPolicy, path: Path, states: np.ndarray, probes: np.ndarray, metadata: Optional[dict]
) -> EdgeExport:
    from quarl.deploy.edge.tflite import MicroPolicy, check, tflite_model

    data = tflite_model(policy, metadata)
    report = EdgeExport([path], policy, states=len(states) if states.ndim > 1 else 0, probes=len(probes))
    if report.states:
        report.checked = check(data, policy, np.concatenate([states, probes]))
        _refuse_differences(report)
    try:
        arena = MicroPolicy(data, policy).arena_bytes
        if arena is not None:
            report.sizes["TFLite Micro tensor arena"] = arena
    except QuarlError as exc:
        report.notes.append(str(exc))
    report.sizes["file"] = len(data)
    write_new(path, data)
    log.info("Exported the full-integer LiteRT policy (%d bytes) to %s", len(data), path)
    return report


def _export_c(
    policy: IntegerPolicy, folder: Path, states: np.ndarray, probes: np.ndarray, metadata: Optional[dict]
) -> EdgeExport:
    from quarl.deploy.edge.toolchain import CPolicy, write_sources

    n = len(states) if states.ndim > 1 else 0
    paths = [folder / name for name in ("policy.c", "policy.h", MEASURES)]
    report = EdgeExport(paths, policy, states=n, probes=len(probes))
    with tempfile.TemporaryDirectory(prefix="quarl-c-export-") as tmp:
        work = Path(tmp)
        if report.states:
            c = CPolicy(policy, work / "host")  # compiles with -Wall -Wextra -Werror
            everything = np.concatenate([states, probes])
            report.checked["C policy (host cc)"] = _differing(c.act(everything), policy.act(everything))
            c.close()
            _refuse_differences(report)
        if policy.weight_coding == "huffman":
            report.notes.append(_stream_note(policy))
        _firmware(policy, states if report.states else None, probes, work, report)
        write_sources(policy, work / "out")
        folder.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
        try:
            origin = "".join(f"   {k}: {v}\n" for k, v in sorted((metadata or {}).items()))
            for name in ("policy.c", "policy.h"):
                text = (work / "out" / name).read_text()
                (staged / name).write_text(f"/* Exported from:\n{origin}*/\n{text}" if origin else text)
            measures = json.dumps(report.measures(metadata), indent=1, sort_keys=True, default=_plain)
            (staged / MEASURES).write_text(measures + "\n")
            os.rename(staged, folder)  # fails if the folder appeared meanwhile
        except OSError:
            shutil.rmtree(staged, ignore_errors=True)
            raise QuarlError(f"Export path {folder} already exists: choose another path or delete it.") from None
    log.info("Exported the C policy to %s", folder)
    return report


#: Values an observation feature takes in the extreme probes every export checks: beyond any
#: calibrated range, infinite and NaN. Every runtime saturates them to the input's codes (NaN: the
#: lowest), as the reference does (`IntegerPolicy.quantize_input`; the contract: docs/edge.md, "NaN and
#: infinite observations", which the C policy keeps only without fast math and so refuses it).
EXTREMES = (np.inf, -np.inf, np.nan, 1e30, -1e30, 1e7, -1e7, 1e5, -1e5)


def extreme_probes(base: np.ndarray) -> np.ndarray:
    """`base` (one observation) with each feature in turn, then all at once, set to each EXTREMES value."""
    flat = np.asarray(base, dtype=np.float32).reshape(-1)
    probes = []
    for value in EXTREMES:
        for j in range(flat.size):
            probe = flat.copy()
            probe[j] = value
            probes.append(probe)
        probes.append(np.full_like(flat, value))
    return np.stack(probes).reshape(-1, *np.shape(base))


def _spread(states: np.ndarray, k: int) -> np.ndarray:
    """At most `k` of `states`, evenly spaced (the record's own and the random ones alike)."""
    return states[np.unique(np.linspace(0, len(states) - 1, min(k, len(states))).astype(int))]


def _firmware(
    policy: IntegerPolicy, states: Optional[np.ndarray], probes: np.ndarray, work: Path, report: EdgeExport
) -> None:
    """Every installed microcontroller target: the policy in its minimal firmware, checked under QEMU
    against the reference on some of `states` and every extreme probe (a difference refuses the
    export), its flash, RAM and instructions per action."""
    from quarl.deploy.edge.targets import TARGETS

    for target in TARGETS.values():
        missing = target.missing() if states is not None else "no states to check it on"
        if missing is not None:
            report.notes.append(f"{target.name}: no firmware check, size or instruction count: {missing}")
            continue
        assert states is not None
        check = np.concatenate([_spread(states, FIRMWARE_CHECK_STATES), probes])
        count = _spread(states, FIRMWARE_COUNT_STATES)
        firmware = target.firmware(policy, check, count, work / target.name)
        key = f"{target.name} firmware under {target.emulator}"
        report.checked[key] = _differing(firmware.actions, policy.act(check))
        report.checked_on[key] = len(check) - len(probes)
        report.firmware[target.name] = {
            "flash": firmware.flash,
            "ram": firmware.ram,
            "float": target.float_note,
            "instructions": firmware.instructions,
            "counted": firmware.counted,
        }
        log.debug("%s: %s", target.title, report.firmware[target.name])
    _refuse_differences(report)


def _plain(value: Any) -> Any:
    """A numpy number as Python's (for JSON)."""
    return value.item() if isinstance(value, np.generic) else str(value)


def _differing(got: np.ndarray, expected: np.ndarray) -> int:
    """States whose action differs (all of them where the shapes differ)."""
    n = len(expected)
    if np.shape(got) != np.shape(expected):
        return n
    return int(np.sum(np.any((np.asarray(got) != np.asarray(expected)).reshape(n, -1), axis=1)))


def _stream_note(policy: IntegerPolicy) -> str:
    from quarl.deploy.edge import cpairs, cstream
    from quarl.deploy.edge.cgen import pack_weights

    pair_code = cpairs.encoded(policy)
    stream = pair_code.stream if pair_code is not None else cstream.encoded(policy)[1]
    n = sum(layer.weight.size for layer in policy.layers)
    packed = sum(pack_weights(layer.weight, layer.weight_bits).size for layer in policy.layers)
    table = (
        f"; coded in pairs, decoded by a {4 << pair_code.bits}-byte table of {pair_code.bits} bits, in the flash too,"
        " beside the Tanh tables, 256 bytes each"
        if pair_code is not None
        else ""
    )
    held = "the shifts" if pair_code is not None else "the Tanh tables and the shifts"
    return (
        f"Huffman-coded stream: {stream.size} bytes hold the {n} weights and {held} "
        f"({8 * stream.size / n:.2f} bits per weight, all in; the weights packed: {packed} bytes{table})"
    )


def _refuse_differences(report: EdgeExport) -> None:
    bad = {target: n for target, n in report.checked.items() if n}
    if bad:
        raise QuarlError(
            "The exported policy does not act as the integer reference: "
            + ", ".join(
                f"{t} differs on {n} of {report.checked_on.get(t, report.states) + report.probes} states and probes"
                for t, n in bad.items()
            )
            + ". Nothing was written; please report this with the record."
        )


EDGE_CHECK_STATES = 10_000  # recorded states an edge export is checked on (the record's, then random ones)


def export_record(
    model: BaseAlgorithm,
    cfg: Any,
    policy: Any,
    path: Union[str, Path],
    fmt: str,
    precision: str,
    activations: str = "int8",
    weight_coding: str = "packed",
    origin: Optional[dict[str, str]] = None,
) -> EdgeExport:
    """`export_edge` of a stored record's policy (`model`, quantized as the record says; `policy`:
    its CachedPolicy): calibrated on the states its fp32 policy visits in the record's calibration
    episodes, checked on those and its evaluation states, topped up with random-action states to
    EDGE_CHECK_STATES."""
    from quarl.config.keys import cell_key
    from quarl.config.method_registry import fp32_config
    from quarl.rl.envs import random_observations

    states = calibration_states(cfg, policy)
    recorded = [states]
    evaluated = policy.folder / f"eval-states-{cell_key(fp32_config(cfg))}.npz"
    if evaluated.exists():
        with np.load(evaluated) as data:
            recorded.append(data["states"])
    check = np.concatenate(recorded)
    if len(check) < EDGE_CHECK_STATES:
        check = np.concatenate([check, random_observations(cfg.env, EDGE_CHECK_STATES - len(check))])
    return export_edge(
        model,
        path,
        fmt,
        obs_transform=policy.obs_transform(),
        calibration_obs=states,
        statistic=str(cfg.quant.get("calibration", "minmax")),
        precision=precision,
        check_obs=check,
        metadata={"env_id": cfg.env.id, **(origin or {})},
        activations=activations,
        weight_coding=weight_coding,
    )
