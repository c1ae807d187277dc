"""Where a collation writes (`quarl.collate.outputs`): a clean --out folder, and no redrawing of an
unchanged collation."""

from __future__ import annotations

import logging
from pathlib import Path

from quarl import cli
from quarl.collate import collate
from quarl.store.sqlite import Store
from tests.collate.studies import stored
from tests.records import ptq_study
from tests.records import write as write_records


def test_collate_out_is_a_clean_folder(tmp_path: Path, caplog):
    path = stored(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole", "acrobot")))
    out = tmp_path / "out"
    first = collate(path, out, formats=["png"])
    assert (out / "sweet_spot/ppo_acrobot.png").is_file()
    (out / "notes.txt").write_text("mine")  # a user's file beside the collation stays
    second = collate(path, out, {"env": "cartpole"}, formats=["png"])
    on_disk = {p for p in out.rglob("*") if p.is_file()}
    assert on_disk == set(second) | {out / ".quarl-collate.json", out / "notes.txt"}
    assert not (out / "sweet_spot/ppo_acrobot.png").exists() and len(first) > len(second)
    listed = {line.split("](")[1][:-1] for line in (out / "README.md").read_text().splitlines()
              if line.startswith("- [")}
    assert {out / f for f in listed} | {out / "README.md"} == set(second)
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("keep")
    with caplog.at_level(logging.ERROR):
        assert cli.main(["collate", "--store", str(path), "--out", str(other), "--formats", "png"]) == 1
    assert "non-empty folder that no collation wrote" in caplog.text and "--overwrite" in caplog.text
    assert (other / "thesis.tex").read_text() == "keep" and len(list(other.iterdir())) == 1
    assert cli.main(["collate", "--store", str(path), "--out", str(other), "--overwrite", "--formats", "png"]) == 0
    assert not (other / "thesis.tex").exists() and (other / "README.md").is_file()


def test_an_unchanged_collation_is_not_drawn_again(tmp_path: Path, caplog):
    """The same records, settings and code: the files stay as they are; a new record, other
    settings (bits, formats) or force draw again."""
    records = ptq_study(algos=("ppo",), envs=("cartpole", "acrobot"))
    path = stored(tmp_path, records[:-1])
    out, readme = tmp_path / "out", tmp_path / "out" / "README.md"

    def drawn(**kw) -> bool:
        before = readme.stat().st_mtime_ns if readme.exists() else None
        written = collate(path, out, **{"formats": ["png"], **kw})
        assert readme in written and all(p.is_file() for p in written)
        return readme.stat().st_mtime_ns != before

    assert drawn()
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with caplog.at_level(logging.INFO, logger="quarl.collate"):
        assert not drawn()
    assert "up to date" in caplog.text and {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamps
    assert drawn(bits=4) and not drawn(bits=4)
    write_records(Store(path), records[-1:])
    assert drawn(bits=4) and not drawn(bits=4) and drawn(bits=4, force=True)
    (out / "sweet_spot/ppo_acrobot.png").unlink()  # a file of the collation gone: drawn again
    assert drawn(bits=4) and (out / "sweet_spot/ppo_acrobot.png").is_file()
    assert drawn(bits=4, formats=["png", "pdf"]) and (out / "sweet_spot/ppo_acrobot.pdf").is_file()
    assert not drawn(bits=4, formats=["pdf", "png"])  # the same formats in another order


def test_formats_choose_the_figure_files_and_an_unknown_one_is_refused(tmp_path: Path, caplog):
    path = stored(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0, 1), bits=(4, 8)))
    out, refused = tmp_path / "out", tmp_path / "refused"
    assert cli.main(["collate", "--store", str(path), "--out", str(out), "--formats", "png"]) == 0
    figures = [p for p in out.rglob("*") if p.suffix in (".png", ".pdf")]
    assert figures and {p.suffix for p in figures} == {".png"}
    assert "--formats png" in (out / "README.md").read_text()  # the command that writes it again
    with caplog.at_level(logging.ERROR):
        assert cli.main(["collate", "--store", str(path), "--out", str(refused), "--formats", "png,svg"]) == 1
    assert "--formats png,svg: figures are written as png and/or pdf." in caplog.text
    assert not refused.exists()


def test_an_out_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path, caplog, monkeypatch):
    path = stored(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0,), bits=(8,)))
    (tmp_path / "a_file").write_text("x")
    monkeypatch.setattr("quarl.collate.collation.load", None)  # reading a record would fail: none is read
    assert cli.main(["collate", "--store", str(path), "--out", str(tmp_path / "a_file" / "coll")]) == 1
    assert "--out" in caplog.text and "a_file is a file, not a folder" in caplog.text and "Traceback" not in caplog.text


def test_a_collation_stopped_half_way_is_replaced_whole_by_the_next(tmp_path: Path, caplog, monkeypatch):
    """SIGTERM in the middle: one line and exit 143; the folder it leaves is quarl's, so running the
    same command again replaces it (it used to be refused as a folder no collation wrote)."""
    import os
    import signal

    from quarl.collate import outputs

    path = stored(tmp_path, ptq_study(algos=("ppo",), envs=("cartpole",), seeds=(0,), bits=(8,)))
    out = tmp_path / "coll"
    real = outputs.write_tables

    def stopped(study, folder):
        real(study, folder)  # some files written, then the signal
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(outputs, "write_tables", stopped)
    command = ["collate", "--store", str(path), "--out", str(out), "--formats", "png"]
    assert cli.main(command) == 143
    assert "quarl collate: Terminated by SIGTERM; what it wrote so far is replaced" in caplog.text
    assert (out / "tables").is_dir() and "in_progress" in (out / outputs.MANIFEST).read_text()
    (out / "tables" / "stale.md").write_text("left by the stopped run")
    monkeypatch.setattr(outputs, "write_tables", real)
    assert cli.main(command) == 0
    assert not (out / "tables" / "stale.md").exists() and "in_progress" not in (out / outputs.MANIFEST).read_text()
