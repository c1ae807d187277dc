"""Export a quarl policy (fp32, PTQ or QAT) to one standalone ONNX file.

The file holds the whole deterministic policy: observation normalisation, the weight layers (fp32;
int8 for precision="int8"; 4-bit / 2-bit weights in ONNX Runtime's MatMulNBits for "int4" / "int2",
see quarl.deploy.nbits) and the action head, with input "obs" (a batch of raw observations)
and output "action". It needs only `onnxruntime` and `numpy` to act:

    import numpy as np, onnxruntime as ort
    session = ort.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])
    action = session.run(["action"], {"obs": obs[None].astype(np.float32)})[0][0]

examples/act_onnx.py runs an exported policy in its Gymnasium environment that way.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.config import method_registry
from quarl.config.schema import cnn_policy
from quarl.deploy import onnx_io
from quarl.deploy.acting import ObsTransform, acting_network
from quarl.deploy.execution import compile_network
from quarl.errors import QuarlError

log = logging.getLogger(__name__)

PRECISIONS = {
    "fp32": "onnx",
    "int8": "onnx_int8",
    "int4": "onnx_int4",
    "int2": "onnx_int2",
}  # -> backend that builds the file


def record_precision(method: str, bits: int) -> tuple[str, Optional[str]]:
    """The precision that exports a policy quantized by `method` to `bits`-bit weights as it is, and
    a note where the file cannot hold that width itself: at most 2 bits -> int2, at most 4 -> int4,
    at most 8 -> int8, 32 -> fp32; 9..16 bits (fp16, bf16 too) -> fp32, which holds them exactly."""
    for precision, most in (("int2", 2), ("int4", 4), ("int8", 8)):
        if bits <= most:
            return precision, None
    if bits >= 32:
        return "fp32", None
    return "fp32", (
        f"quant={method} ({bits}-bit weights) is exported as fp32, which holds its weights exactly: "
        f"quarl exports no {bits}-bit ONNX file"
    )


FORMAT_KEYS = ("format", "act_format", "input_format")  # PTQ's number formats of weights, activations, input


def export_precision(cfg: Any, format: str, requested: Optional[str], bits: int) -> str:
    """The precision `quarl export` writes a record's policy at (`requested`, else its own
    `record_precision`, with a warning where the file cannot hold that width); refused at once
    where the format cannot run the policy's network (a CNN in a full-integer MLP format), before
    any weight is loaded or calibrated."""
    if format != "onnx" and cnn_policy(cfg):
        raise QuarlError(
            f"--format {format} runs MLP policies only, and this record's env={cfg.env.name} gives images to a CNN "
            "policy: export it with --format onnx."
        )
    in_formats = [  # no exporter writes a block or FP8 format's tensors yet
        f"quant.{key}={cfg.quant[key]}" for key in FORMAT_KEYS if cfg.quant.get(key) not in (None, "int")
    ]
    if in_formats:
        said = " and ".join(in_formats)
        if requested is None:
            raise QuarlError(
                f"This record's policy runs in {said}, which no export format writes yet: "
                "add --precision (fp32, int8, int4 or int2) to export its fp32 policy at that precision instead."
            )
        log.warning("--precision %s exports this record's fp32 policy at %s, not in %s.", requested, requested, said)
    if requested is not None:
        width = int(requested.removeprefix("int")) if requested.startswith("int") else 32
        if format != "onnx" and method_registry.of(cfg).integer and width < bits:  # ONNX's own export says so itself
            log.warning(
                "--precision %s re-rounds this record's %d-bit weights to %d bits: the file's policy is not the "
                "record's, and its check compares it with its own integer reference, not with the record.",
                requested,
                bits,
                width,
            )
        return requested
    precision, why = record_precision(str(cfg.quant.method), bits)
    if why:
        log.warning("%s (--precision chooses another).", why)
    return precision


def provenance(cfg: Any, precision: str, key: str) -> dict[str, str]:
    """Where an exported file comes from, as every format stores it (ONNX metadata, the .tflite
    file's "quarl" metadata, the C sources' first comment): the record's cell `key`, its training,
    its quantization, the file's precision and quarl's version."""
    import quarl
    from quarl.config.keys import train_steps

    return {
        "quarl.cell_key": key,
        "quarl.training": f"algo={cfg.algo.name} env={cfg.env.name} seed={cfg.seed} train.steps={train_steps(cfg)}",
        "quarl.quant": method_registry.of(cfg).describe(cfg.quant),
        "quarl.precision": precision,
        "quarl.version": quarl.__version__,
    }


def _env_id(model: BaseAlgorithm) -> Optional[str]:
    env = model.get_env()
    if env is None:
        return None
    try:
        spec = env.get_attr("spec", indices=[0])[0]
        return None if spec is None else str(spec.id)
    except Exception:  # an env without a spec: the id is optional metadata
        return None


def check_new(path: Path) -> None:
    """Refuse an export path that exists (a file, a folder or a link): nothing is overwritten; and one
    under a file, naming the parent that is a file (not the system's "File exists" about the path)."""
    if path.exists() or path.is_symlink():
        raise QuarlError(f"Export path {path} already exists: choose another path or delete it.")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise QuarlError(
            f"Export path {path} cannot be made: {parent} is a file, not a folder; give a path in a folder."
        )


def _check_target(path: Path) -> None:
    if path.suffix != ".onnx":
        raise QuarlError(f"Export path {path} must end in .onnx.")
    check_new(path)


def export(
    model: BaseAlgorithm,
    path: Union[str, Path],
    precision: str = "fp32",
    obs_transform: ObsTransform = None,
    calibration_obs: Optional[np.ndarray] = None,
    env_id: Optional[str] = None,
    origin: Optional[dict[str, str]] = None,
) -> Path:
    """Write `model`'s deterministic policy to the ONNX file `path` and return the path.

    Args:
        model: an SB3 model (fp32, PTQ-quantized in place, or QAT with its QuantLayers on).
        path: a new file ending in .onnx; its folder is created if needed. An existing path is
            refused. The file is written under a temporary name in the same folder and linked
            into place only when complete, so a failed export leaves nothing behind.
        precision: "fp32", "int8" (ONNX Runtime dynamic int8 for MLPs, static for CNNs), "int4" or
            "int2" (weight-only MatMulNBits: the policy's own weights where it is quantized to at most
            that many bits, else rounded block-wise, with a warning; convolutions and layers with
            fewer than 16 inputs stay fp32).
        obs_transform: the policy's VecNormalize (or its normalize_obs), folded into the file.
        calibration_obs: real observations calibrating int8 activation ranges (needed for int8
            convolutional policies; a few hundred from the environment).
        env_id: Gymnasium id stored in the file's metadata (default: the model's env, if it has one).
        origin: more metadata, e.g. a stored record's `provenance`.

    Raises:
        QuarlError: bad precision or path, path exists, a package missing, a layer int8 cannot
            quantize, no layer int4 / int2 can run.
    """
    if precision not in PRECISIONS:
        raise QuarlError(f"precision={precision} is not supported for export: choose one of {', '.join(PRECISIONS)}.")
    path = Path(path)
    _check_target(path)
    onnx = onnx_io.require("onnx", "Exporting to ONNX")
    net = acting_network(model, obs_transform)
    runner = compile_network(net, PRECISIONS[precision], calibration_obs)
    proto = onnx.load_model_from_string(runner.onnx_model)
    meta = {
        "quarl.algo": net.algo,
        "quarl.precision": precision,
        "quarl.obs_shape": json.dumps(list(net.obs_shape)),
        "quarl.obs_dtype": net.obs_dtype.name,
        "quarl.action_kind": net.action_kind,
        "quarl.action_shape": json.dumps(list(net.action_shape)),
        "quarl.env_id": env_id or _env_id(model) or "",
        **(origin or {}),
    }
    onnx.helper.set_model_props(proto, {**{p.key: p.value for p in proto.metadata_props}, **meta})
    proto.doc_string = (
        f"quarl {net.algo} policy ({precision}): input 'obs' = a batch of raw observations {list(net.obs_shape)} "
        f"({net.obs_dtype.name}); output 'action' = greedy actions ({net.action_kind})."
    )
    data = proto.SerializeToString()
    write_new(path, data)
    log.info("Exported %s policy (%s, %d bytes) to %s", net.algo, precision, len(data), path)
    return path


def _unwritable(path: Path, exc: OSError) -> QuarlError:
    """The sentence for an export that could not be written: a full disk, else the system's reason,
    naming the export path (not the temporary file or folder the system named)."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return QuarlError(
            f"The disk is full: the export {path} could not be written ({why}); free space there and export again."
        )
    return QuarlError(f"Export path {path} cannot be written ({why}): give a path in a folder you may write in.")


def write_new(path: Path, data: bytes) -> None:
    """Write `data` to a new file `path`: complete or not at all, never over an existing file; a
    folder that cannot be made or written, or a full disk, is a QuarlError naming `path`."""
    try:
        _write_new(path, data)
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _write_new(path: Path, data: bytes) -> None:
    """`write_new` itself: a temporary file beside `path`, linked to it once complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make the artefact private
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if the path appeared meanwhile
        except FileExistsError:
            raise QuarlError(f"Export path {path} already exists: choose another path or delete it.") from None
        except OSError:  # a file system without hard links
            if path.exists():
                raise QuarlError(f"Export path {path} already exists: choose another path or delete it.") from None
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
