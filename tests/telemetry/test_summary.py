"""The summary contract computed from hand-made rows."""

from __future__ import annotations

import pytest

from rlbench.telemetry.summary import (
    ENERGY_SOURCES,
    SUMMARY_KEYS,
    gpu_device_energy,
    row_gpu_power,
    summarize,
)


def test_counter_preferred_over_power_integration() -> None:
    times = [0.0, 1.0, 2.0]
    # The counter says 250 J; the power samples would say 200 J.
    assert gpu_device_energy(times, [0, 100_000, 250_000], [100.0, 100.0, 100.0]) == (250.0, "nvml_counter")
    assert gpu_device_energy(times, [None, None, None], [100.0, 100.0, 100.0]) == (200.0, "nvml_power")
    assert gpu_device_energy(times, [0, None, None], [100.0, 100.0, 100.0]) == (200.0, "nvml_power")
    assert gpu_device_energy(times, [None] * 3, [None] * 3) == (None, "none")


def test_row_gpu_power_needs_every_gpu() -> None:
    assert row_gpu_power({"gpu0_power_w": 100.0, "gpu1_power_w": 50.0}, [0, 1]) == 150.0
    assert row_gpu_power({"gpu0_power_w": 100.0, "gpu1_power_w": None}, [0, 1]) is None
    assert row_gpu_power({}, []) is None


def rows_two_gpus() -> list[dict]:
    # gpu0 has a counter (300 J); gpu1 only power, 50 W for 2 s (100 J); RAPL 40 J; DRAM 4 J.
    return [
        {"t": 10.0, "gpu0_power_w": 150.0, "gpu0_energy_mj": 0, "gpu0_util": 0.5,
         "gpu1_power_w": 50.0, "gpu1_energy_mj": None, "gpu1_util": 1.0,
         "cpu_util": 0.2, "cpu_pkg_energy_j": 5.0, "dram_energy_j": 1.0},
        {"t": 11.0, "gpu0_power_w": 150.0, "gpu0_energy_mj": 150_000, "gpu0_util": 0.5,
         "gpu1_power_w": 50.0, "gpu1_energy_mj": None, "gpu1_util": 1.0,
         "cpu_util": 0.4, "cpu_pkg_energy_j": 25.0, "dram_energy_j": 3.0},
        {"t": 12.0, "gpu0_power_w": 170.0, "gpu0_energy_mj": 300_000, "gpu0_util": 0.5,
         "gpu1_power_w": 50.0, "gpu1_energy_mj": None, "gpu1_util": 1.0,
         "cpu_util": 0.6, "cpu_pkg_energy_j": 45.0, "dram_energy_j": 5.0},
    ]  # fmt: skip


def test_full_summary_by_hand() -> None:
    s = summarize(rows_two_gpus(), cpu_tdp_w=100.0)
    assert tuple(s) == SUMMARY_KEYS
    assert s["energy_gpu_j"] == pytest.approx(400.0)
    assert s["energy_source_gpu"] == "nvml_power"  # the weakest source used
    assert s["power_gpu_w_avg"] == pytest.approx((200 + 200 + 220) / 3)
    assert s["power_gpu_w_max"] == pytest.approx(220.0)
    assert s["gpu_util_avg"] == pytest.approx(0.75)
    assert (s["energy_cpu_j"], s["energy_source_cpu"]) == (pytest.approx(40.0), "rapl")  # not the estimate
    assert s["power_cpu_w_avg"] == pytest.approx(20.0)
    assert s["energy_dram_j"] == pytest.approx(4.0)
    assert s["energy_per_task_j"] == pytest.approx(444.0)
    assert s["cpu_util_avg"] == pytest.approx(0.4)
    assert "gpu1 energy integrated from sampled power" in s["telemetry_gpu_reason"]
    assert s["telemetry_cpu_reason"] is None


def test_estimate_used_only_without_rapl() -> None:
    rows = [{**r, "cpu_pkg_energy_j": None, "dram_energy_j": None} for r in rows_two_gpus()]
    s = summarize(rows, cpu_tdp_w=100.0, idle_frac=0.5)
    # P = 100 * (0.5 + 0.5 u): 60, 70, 80 W over 1 s steps -> 65 + 75 = 140 J.
    assert (s["energy_cpu_j"], s["energy_source_cpu"]) == (pytest.approx(140.0), "estimate")
    assert s["power_cpu_w_avg"] == pytest.approx(70.0)
    assert s["energy_dram_j"] is None
    assert s["energy_per_task_j"] == pytest.approx(540.0)
    assert "estimate: P = 100 W * (0.5 + 0.5 * cpu_util)" in s["telemetry_cpu_reason"]
    s = summarize(rows)
    assert (s["energy_cpu_j"], s["energy_source_cpu"], s["power_cpu_w_avg"]) == (None, "none", None)
    assert "no cpu_tdp_w configured" in s["telemetry_cpu_reason"]


def test_nothing_measured_is_none_never_zero() -> None:
    s = summarize([{"t": 0.0, "cpu_util": None}, {"t": 1.0}], ["nvml gone"], ["rapl gone"])
    assert {k: s[k] for k in SUMMARY_KEYS if k.startswith(("energy_", "power_", "gpu_", "cpu_"))} == {
        "energy_gpu_j": None, "energy_cpu_j": None, "energy_dram_j": None,
        "energy_per_task_j": None, "power_gpu_w_avg": None, "power_gpu_w_max": None,
        "power_cpu_w_avg": None, "gpu_util_avg": None, "cpu_util_avg": None,
        "energy_source_gpu": "none", "energy_source_cpu": "none",
    }  # fmt: skip
    assert s["telemetry_gpu_reason"] == "nvml gone; no GPU samples"
    assert s["telemetry_cpu_reason"].startswith("rapl gone")
    assert summarize([])["energy_per_task_j"] is None
    assert {s["energy_source_gpu"], s["energy_source_cpu"]} <= ENERGY_SOURCES
