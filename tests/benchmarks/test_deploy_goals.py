"""benchmarks/deploy_goals.py and deploy_anchors.py (issue 58): the goals table's verdicts from
measured rows, and CMSIS-NN's anchor built and counted under QEMU where the toolchains are."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import deploy_anchors  # noqa: E402  (benchmarks is no package)
import deploy_goals  # noqa: E402

from quarl.deploy.edge.targets import TARGETS  # noqa: E402


def _row(target: str, policy: str, instructions: float, checked: str = "300 of 300") -> dict:
    return {"network": "n", "C policy": policy, "target": TARGETS[target].title,
            "instructions / action": instructions, "instructions / MAC": instructions / 4480,
            "actions as the reference under QEMU": checked}


def _anchor(target: str, instructions: float) -> deploy_anchors.Anchor:
    return deploy_anchors.Anchor(target, "pure C", instructions, 4480, "-Os")


def test_every_registered_target_gets_a_row_and_the_goals_decide_met():
    rows = [_row("riscv32", "c", 19_252), _row("cortex-m0", "c", 41_000), _row("cortex-m3", "c", 18_662),
            _row("cortex-m4", "c", 7_832, "299 of 300"), _row("cortex-m4", "c [int4 huffman]", 22_839)]
    anchors = {"riscv32": _anchor("riscv32", 18_000), "cortex-m3": "qemu-system-arm is not installed"}
    table = {r["path"].split("`")[1] + (" huffman" if "Huffman" in r["path"] else ""): r
             for r in deploy_goals.target_rows(rows, anchors, "n", "label")}
    assert set(TARGETS) <= set(table)
    assert table["riscv32"]["met"] == "no"  # within 27,000 but not below CMSIS-NN's 4.02 per MAC
    assert table["cortex-m0"]["met"] == "no"  # 9.15 per MAC
    assert table["cortex-m3"]["met"] == "yes" and table["cortex-m3"]["anchor"].startswith("n/a (qemu")
    assert table["cortex-m4"]["met"] == "no"  # one action differs from the reference
    assert table["cortex-m4 huffman"]["met"] == "yes" and "2.92x int8" in table["cortex-m4 huffman"]["now"]


def test_the_host_row_is_onnx_int8_over_the_c_policy():
    table = pd.DataFrame([
        {"network": "n", "backend": "c", "policy": "fp32 -> full int8", "median ms": 0.001},
        {"network": "n", "backend": "onnx_int8", "policy": "fp32", "median ms": 0.016},
    ])
    row = deploy_goals.host_row(table, "n")
    assert row["now"].startswith("16.0x") and row["met"] == "yes"
    assert deploy_goals.host_row(table, "other")["met"] == "no"


def test_a_missing_cmsis_nn_checkout_is_one_sentence(tmp_path):
    why = deploy_anchors.anchors(list(TARGETS.values()), [4, 64, 64, 2], tmp_path)
    assert set(why) == set(TARGETS) and all("--cmsis-nn PATH" in w for w in why.values())


@pytest.mark.parametrize("name", ["cortex-m3", "cortex-m4"])
def test_cmsis_nn_is_counted_on_the_targets_harness(name):
    target = TARGETS[name]
    if target.missing() is not None:
        pytest.skip(target.missing())
    anchor = deploy_anchors.count(target, [4, 16, 2])
    assert anchor.macs == 96 and anchor.instructions > anchor.macs
    assert anchor.kernel == ("SIMD (DSP extension)" if name == "cortex-m4" else "pure C")
