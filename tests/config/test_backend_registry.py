"""The backend registry: every plugin found, its refusals in the config check, and the docs' table."""

from pathlib import Path

import pytest

from quarl.config import backend_registry
from quarl.config.schema import exec_backends
from quarl.errors import QuarlError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_backend_module_is_found_and_listed_in_the_docs():
    found = backend_registry.registry()
    assert list(found)[:3] == ["torch", "onnx", "onnx_int8"] and {"c", "tflite_16x8", "onnx_int2"} <= set(found)
    assert exec_backends() == ("fake", "auto", *found)
    formats = backend_registry.export_formats()  # onnx (the default) first, then every backend's
    written = {b.export_format for b in found.values() if b.export_format}
    assert formats[0] == "onnx" and set(formats) == {"onnx", *written} and {"c", "tflite"} <= written
    assert backend_registry.table() in (DOCS / "execution.md").read_text()


@pytest.mark.parametrize(
    "backend, integer, bits, accepted",
    [("torch", False, 16, True), ("onnx_int8", True, 8, True), ("onnx_int8", False, 16, False),
     ("onnx_int4", True, 8, False), ("c", True, 4, True), ("c_16x8", True, 9, False)],
)
def test_a_backend_accepts_integer_policies_up_to_its_weight_bits(backend, integer, bits, accepted):
    assert backend_registry.get(backend).accepts(integer, bits) is accepted


def test_an_unknown_backend_names_the_choices():
    with pytest.raises(QuarlError, match="backend=tensorrt is not known: choose one of auto, torch, onnx"):
        backend_registry.get("tensorrt")


def test_a_plugin_module_adds_a_backend(tmp_path, monkeypatch):
    """Adding a backend is adding a module: the registry, the config's choices and the table pick it up."""
    import quarl.backends

    (tmp_path / "three_bits.py").write_text(
        "from quarl.config.backend_registry import Backend\n"
        "BACKENDS = (Backend('onnx_int3', 'int3', lambda *a: None, 'a 3-bit kernel', max_bits=3, rank=5),)\n"
    )
    monkeypatch.setattr(quarl.backends, "__path__", [*quarl.backends.__path__, str(tmp_path)])
    monkeypatch.setattr(backend_registry, "_REGISTRY", {})
    assert "onnx_int3" in exec_backends() and not backend_registry.get("onnx_int3").accepts(True, 4)
    assert "| `onnx_int3` | int3 | a 3-bit kernel | integer policies, ≤ 3-bit weights |" in backend_registry.table()
