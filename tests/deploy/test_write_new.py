"""An export's file is written whole or not at all, and a path that cannot be written is one
sentence naming the export path (not the temporary file the system named)."""

from __future__ import annotations

import errno

import pytest

from quarl.deploy import onnx_export
from quarl.deploy.onnx_export import write_new
from quarl.errors import QuarlError


def test_an_export_under_a_file_names_the_export_path(tmp_path):
    (tmp_path / "file").write_text("in the way")
    out = tmp_path / "file" / "sub" / "policy.onnx"
    with pytest.raises(QuarlError) as err:
        write_new(out, b"onnx")
    assert str(err.value) == (f"Export path {out} cannot be written (Not a directory): give a path in a folder you "
                              "may write in.")


def test_a_full_disk_is_called_so_and_leaves_nothing(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / ".policy.onnx.abc.tmp"))

    monkeypatch.setattr(onnx_export.tempfile, "mkstemp", full)
    with pytest.raises(QuarlError) as err:
        write_new(tmp_path / "policy.onnx", b"onnx")
    assert str(err.value) == (f"The disk is full: the export {tmp_path / 'policy.onnx'} could not be written (No space "
                              "left on device); free space there and export again.")
    assert not list(tmp_path.iterdir())


def test_a_new_file_is_written_whole(tmp_path):
    write_new(tmp_path / "new" / "policy.onnx", b"onnx")
    assert (tmp_path / "new" / "policy.onnx").read_bytes() == b"onnx" and len(list((tmp_path / "new").iterdir())) == 1
