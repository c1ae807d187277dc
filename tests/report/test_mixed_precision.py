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
    row = (
        "| Policy B | 3 conv (512 filters) + FC 512 | 179 / 172 | 1.04x | 1 | 200.0 / 300.0 | 1.50x "
        "| 400 / 480 | 1.20x |"
    )
    assert row in text and "H100 (`benchmarks/device/gpu.sh`), 1 run\n" in text


def test_several_runs_give_the_mean_with_their_range_and_say_how_many(tmp_path):
    def run(number, fp32, bf16, steps_fp32, steps_bf16, device):
        return [
            {"policy": p, "updates/s fp32": fp32, "updates/s bf16": bf16, "update speedup": bf16 / fp32,
             "env steps/s fp32": steps_fp32, "env steps/s bf16": steps_bf16,
             "end-to-end speedup": steps_bf16 / steps_fp32, "device": device, "run": number}
            for p in ["Policy A", "Policy B", "Policy C"]
        ]
    rows = run(1, 100.0, 120.0, 400.0, 400.0, "NVIDIA H100") + run(2, 200.0, 160.0, 300.0, 360.0, "NVIDIA H100")
    pd.DataFrame(rows).to_csv(tmp_path / AMP_FILE, index=False)
    text = section(tmp_path)
    # updates/s: (100+200)/2 = 150 and (120+160)/2 = 140; speedups 1.2 and 0.8 -> mean 1.00, range 0.80-1.20;
    # end to end: 1.0 and 1.2 -> 1.10 (1.00-1.20); env steps/s (400+300)/2 = 350 and (400+360)/2 = 380
    row = (
        "| Policy A | 3 conv (128 filters) + FC 128 | 127 / 156 | 0.87x (as printed; 127/156 = 0.81) | 2 | "
        "150.0 / 140.0 | 1.00x (0.80-1.20) "
        "| 350 / 380 | 1.10x (1.00-1.20) |"
    )
    assert row in text and "H100 (`benchmarks/device/gpu.sh`), 2 runs\n" in text


def test_runs_on_two_gpus_get_a_table_each_and_are_never_averaged(tmp_path):
    rows = [
        {"policy": p, "updates/s fp32": fp32, "updates/s bf16": fp32 * 1.5, "update speedup": 1.5,
         "env steps/s fp32": 400.0, "env steps/s bf16": 480.0, "end-to-end speedup": 1.2, "device": device, "run": run}
        for run, device, fp32 in [(1, "NVIDIA H100", 100.0), (2, "NVIDIA H200", 300.0)]
        for p in ["Policy A", "Policy B", "Policy C"]
    ]
    pd.DataFrame(rows).to_csv(tmp_path / AMP_FILE, index=False)
    text = section(tmp_path)
    assert "ran on NVIDIA H100 (`benchmarks/device/gpu.sh`), 1 run\n" in text
    assert "ran on NVIDIA H200 (`benchmarks/device/gpu.sh`), 1 run\n" in text
    # each card's own 100 / 150 and 300 / 450; the two cards' mean (200 / 300) appears nowhere
    assert "| 1 | 100.0 / 150.0 |" in text and "| 1 | 300.0 / 450.0 |" in text and "200.0 / 300.0" not in text
    order = [text.index(s) for s in ("NVIDIA H100", "100.0 / 150.0", "NVIDIA H200", "300.0 / 450.0")]
    assert order == sorted(order)
