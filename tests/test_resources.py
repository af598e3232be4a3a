"""Resource limits: CPU intra-op threads, green contexts and MPS (with fakes), the ratio."""

import threading
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from rlbench.resources import ComputeLimit, ResourceError, cpu_gpu_ratio, granted_sms, usable_cpus
from rlbench.runner import RoleThread


class FakeGreenContext:
    created: ClassVar[list] = []

    def __init__(self, num_sms, device_id):
        self.num_sms, self.device_id, self.stack = num_sms, device_id, 0

    @classmethod
    def create(cls, num_sms=None, device_id=None, **kw):
        ctx = cls(num_sms, device_id)
        cls.created.append(ctx)
        return ctx

    def set_context(self):
        self.stack += 1

    def pop_context(self):
        self.stack -= 1


def fake_torch(sms=132, major=9, initialized=False):
    props = SimpleNamespace(multi_processor_count=sms, major=major, name="Fake H100")
    cuda = SimpleNamespace(get_device_properties=lambda d: props, is_initialized=lambda: initialized,
                           current_device=lambda: 0)
    return SimpleNamespace(cuda=cuda, get_num_threads=torch.get_num_threads, set_num_threads=torch.set_num_threads)


CUDA = torch.device("cuda", 0)


def test_study_ratios():
    assert cpu_gpu_ratio(40, 80) == 0.5  # DGX-1 half-GPU point in the study
    assert cpu_gpu_ratio(40, 40) == 1.0
    with pytest.raises(ValueError):
        cpu_gpu_ratio(0, 8)


@pytest.mark.parametrize("requested, major, granted", [(132, 9, 132), (66, 9, 72), (32, 9, 32), (1, 9, 8),
                                                       (5, 8, 6), (1, 8, 4), (3, 7, 4), (130, 9, 132)])
def test_green_context_granularity(requested, major, granted):
    assert granted_sms(requested, 132, major) == granted


def test_cpu_limit_caps_and_restores_intra_op_threads():
    before = torch.get_num_threads()
    limit = ComputeLimit(1, torch.device("cpu"))
    assert (limit.grant.compute_unit, limit.grant.granted, limit.grant.total) == ("cpu_thread", 1, len(usable_cpus()))
    with limit:
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_cpu_limit_above_host_is_refused():
    with pytest.raises(ResourceError, match=r"sm_limit=\d+: this host has"):
        ComputeLimit(len(usable_cpus()) + 1, torch.device("cpu"))


def test_green_context_is_current_in_role_threads(monkeypatch):
    import torch.cuda.green_contexts as gc

    monkeypatch.setattr(gc, "GreenContext", FakeGreenContext)
    limit = ComputeLimit(16, CUDA, "green_context", torch_mod=fake_torch())
    assert (limit.grant.backend, limit.grant.requested, limit.grant.granted, limit.grant.total) == \
        ("green_context", 16, 16, 132)
    seen = []

    class Role:
        name = "learner"

        def run(self, stop):
            seen.append(FakeGreenContext.created[-1].stack)

    with limit:
        th = RoleThread(Role(), threading.Event(), limit.thread_scope)
        th.start()
        th.join()
    assert seen == [1] and FakeGreenContext.created[-1].stack == 0
    assert FakeGreenContext.created[-1].num_sms == 16


def test_sm_limit_above_the_gpu_is_refused():
    with pytest.raises(ResourceError, match="has 132 SMs"):
        ComputeLimit(200, CUDA, torch_mod=fake_torch())


def test_mps_refuses_without_daemon_and_sets_percentage_with_one(tmp_path):
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    with pytest.raises(ResourceError, match="no MPS control daemon"):
        ComputeLimit(66, CUDA, "mps", torch_mod=fake_torch(), env=env)
    (tmp_path / "control").touch()
    limit = ComputeLimit(66, CUDA, "mps", torch_mod=fake_torch(), env=env)
    with limit:
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
    with pytest.raises(ResourceError, match="fresh process"), \
            ComputeLimit(66, CUDA, "mps", torch_mod=fake_torch(initialized=True), env=env):
        pass


@pytest.mark.e2e
@pytest.mark.skipif(len(usable_cpus()) < 2, reason="needs 2 CPU threads to compare 1 with 2")
def test_sm_limit_changes_the_learners_threads_on_cpu(compose_cfg, store):
    from rlbench.job import run_job
    from tests.conftest import CARTPOLE_TINY, runs

    for n in (1, 2):
        cfg = compose_cfg([*CARTPOLE_TINY, "actors=2", f"sm_limit={n}", "progress=log",
                           "telemetry.enabled=false", *store["overrides"]])
        final = run_job(cfg, overrides=[f"sm_limit={n}"])
        assert final["learner_intra_op_threads"] == n
        assert final["sm_granted"] == n and final["cpu_gpu_ratio"] == pytest.approx(1 / n)
    by_name = {r.info.run_name: r for r in runs(store["uri"])}
    assert by_name["sm_limit=2"].data.metrics["cpu_gpu_ratio"] == 0.5 and "cpu_gpu_ratio" not in by_name[
        "sm_limit=2"].data.params  # a metric, not also a param
    assert by_name["sm_limit=2"].data.tags["compute_unit"] == "cpu_thread"
