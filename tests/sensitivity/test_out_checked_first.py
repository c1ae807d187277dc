"""`quarl sensitivity --out` somewhere that cannot be written is refused before the policy is
trained or studied, in one sentence naming the path and the reason."""

from __future__ import annotations

from quarl import cli


def test_an_out_in_the_way_of_a_file_is_refused_before_anything_is_trained(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("in the way")
    with caplog.at_level("ERROR"):
        assert cli.main(["sensitivity", "--out", "file/study", "algo=ppo", "env=cartpole"]) == 1
    assert caplog.records[-1].getMessage() == (
        f"quarl: --out file/study cannot be written ({tmp_path / 'file'} is a file, not a folder): give a folder you "
        "may write in.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no outputs/: nothing trained
