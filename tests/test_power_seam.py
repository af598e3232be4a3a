"""The power-source seam: a meter defined here, under tests/, registered from the test, is
sampled, accounted and logged by a real job with no edit in rlbench."""

import csv
from pathlib import Path

import mlflow
import pytest
import torch

from rlbench.config.schema import TelemetryConfig
from rlbench.core.metrics import declared
from rlbench.telemetry import sources
from rlbench.telemetry.job_telemetry import JobTelemetry
from rlbench.telemetry.sampler import TelemetrySampler
from rlbench.tracking.unmeasured import unmeasured_of
from tests.conftest import CARTPOLE_TINY
from tests.power_fake import FiftyWatts, Unplugged
from tests.telemetry.fakes import FakeClock


@pytest.fixture
def fake_meter():
    sources.register("fake", FiftyWatts)
    yield "fake"
    sources.unregister("fake")


def test_a_registered_meter_is_sampled_and_its_energy_adds_into_the_task(fake_meter):
    clock = FakeClock()
    sampler = TelemetrySampler(nvml=None, rapl=None, cpu=None, clock=clock)
    for _ in range(3):  # t = 0, 1, 2: 50 W for 2 s
        sampler.sample_now()
        clock.advance(1.0)
    assert sampler.rows()[1] == {"t": 1.0, "power_fake_w": 50.0, "energy_fake_j": None}
    s = sampler.summary()
    assert (s["energy_fake_j"], s["power_fake_w_avg"], s["energy_per_task_j"]) == (100.0, 50.0, 100.0)
    assert s["telemetry_fake_reason"] is None and s["energy_source_gpu"] == "none"  # the built-in keys stay
    meter = sampler.meters["fake"]
    sampler.stop()
    assert meter.closed  # the sampler made it, so the sampler closes it


def test_the_meters_metrics_are_declared_only_while_it_is_registered(fake_meter):
    assert declared("energy_fake_j") and declared("power_fake_w_avg") and not declared("energy_other_j")
    sources.unregister("fake")
    assert not declared("energy_fake_j")


@pytest.mark.parametrize("name", ["gpu", "rapl", "per_task", "Fake", "fake-meter"])
def test_a_built_in_taken_or_bad_name_is_refused(name):
    with pytest.raises(sources.PowerSourceError, match=repr(name)):
        sources.register(name, FiftyWatts)


def test_the_environment_variable_plugs_in_meters_by_path():
    (s,) = sources._from_env("fake=tests.power_fake:FiftyWatts").values()
    assert s.name == "fake" and isinstance(s.make(None), FiftyWatts)
    with pytest.raises(sources.PowerSourceError, match="is not name=module:attr"):
        sources._from_env("fake=tests.power_fake")


def test_a_meter_that_reads_nothing_is_unmeasured_with_its_reason():
    sources.register("unplugged", Unplugged)
    try:
        jt = JobTelemetry(TelemetryConfig(), torch.device("cpu"))
        jt.sampler.sample_now()
        jt.sampler.sample_now()
        jt.sampler.stop()
        metrics, tags = jt.final({"fps": 100.0, "frames": 1000, "runtime_s": 1.0}, [], {})
    finally:
        sources.unregister("unplugged")
    assert "energy_unplugged_j" not in metrics and "power_unplugged_w_avg" not in metrics
    why = "the fake meter is unplugged; unplugged gave fewer than 2 readings"
    assert (tags["null/energy_unplugged_j"], tags["null/power_unplugged_w_avg"]) == (why, why)


@pytest.mark.e2e
def test_a_real_job_logs_the_registered_meter(fake_meter, tmp_path, empty_store_db):
    from tests.test_job_telemetry import _real_job

    job = _real_job(tmp_path, empty_store_db, [*CARTPOLE_TINY, "actors=2"])
    m, tags = job.run.data.metrics, job.run.data.tags
    assert job.run.info.status == "FINISHED" and "telemetry/telemetry.csv" in job.telemetry_artifacts
    path = mlflow.MlflowClient().download_artifacts(job.run.info.run_id, "telemetry/telemetry.csv")
    with Path(path).open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2 and all(float(r["power_fake_w"]) == 50.0 for r in rows)  # its power series
    span = float(rows[-1]["t"]) - float(rows[0]["t"])
    assert m["energy_fake_j"] == pytest.approx(50.0 * span, rel=1e-5) and m["power_fake_w_avg"] == 50.0
    parts = [m[k] for k in ("energy_gpu_j", "energy_cpu_j", "energy_dram_j", "energy_fake_j") if k in m]
    assert m["energy_per_task_j"] == pytest.approx(sum(parts), rel=1e-5)
    watts = 50.0 + m.get("power_gpu_w_avg", 0.0) + (m["power_cpu_w_avg"] if tags["energy_source_cpu"] == "rapl" else 0)
    assert m["perf_per_watt"] == pytest.approx(m["fps"] / watts, rel=1e-4)  # fps as logged, rounded
    assert not {"energy_fake_j", "power_fake_w_avg", "energy_per_task_j"} & set(unmeasured_of(tags))
    assert [k for k in m if not declared(k)] == []  # it logs only contract names
