"""The report's mixed-precision section: the paper's table alone until a GPU machine's amp.csv lands,
then quarl's measurements beside it with the device named."""

import pandas as pd

from quarl.report.mixed_precision import AMP_FILE, section


def test_without_a_measurement_the_section_says_so_and_shows_the_papers_table(tmp_path):
    text = section(tmp_path)
    assert "Not measured yet" in text and "| Policy C | 3 conv (1024 filters) + FC 2048 | 391 / 242 | 1.61x |" in text
    assert "quarl: updates/s" not in text


def test_a_measurement_lands_beside_the_papers_with_its_device(tmp_path):
    rows = [
        {"policy": p, "updates/s fp32": 100.0 * (i + 1), "updates/s bf16": 150.0 * (i + 1), "update speedup": 1.5,
         "env steps/s fp32": 400.0, "env steps/s bf16": 480.0, "end-to-end speedup": 1.2, "device": "NVIDIA H100"}
        for i, p in enumerate(["Policy A", "Policy B", "Policy C"])
    ]
    pd.DataFrame(rows).to_csv(tmp_path / AMP_FILE, index=False)
    text = section(tmp_path)
    assert "ran on NVIDIA H100" in text and "Not measured yet" not in text
    row = "| Policy B | 3 conv (512 filters) + FC 512 | 179 / 172 | 1.04x | 200.0 / 300.0 | 1.50x | 400 / 480 | 1.20x |"
    assert row in text
