"""Resource limits: CPU intra-op threads, green contexts and MPS (with fakes), the ratio."""

import contextlib
import threading
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from rlbench.core.resources import (
    ComputeLimit,
    ResourceError,
    cpu_gpu_ratio,
    granted_sms,
    in_autograd_thread,
    usable_cpus,
)
from rlbench.roles.runner import RoleThread


class FakeGreenContext:
    created: ClassVar[list] = []

    def __init__(self, num_sms, device_id):
        self.num_sms, self.device_id, self.stacks = num_sms, device_id, {}  # thread id -> pushes (CUDA's, per thread)

    @property
    def stack(self) -> int:
        return sum(self.stacks.values())

    def here(self) -> int:
        return self.stacks.get(threading.get_ident(), 0)

    @classmethod
    def create(cls, num_sms=None, device_id=None, **kw):
        assert device_id in FakeCuda.primary_contexts, "a green context is made from the device's primary context"
        ctx = cls(num_sms, device_id)
        cls.created.append(ctx)
        return ctx

    def set_context(self):
        self.stacks[threading.get_ident()] = self.here() + 1

    def pop_context(self):
        assert self.here() > 0, "popped in a thread where it is not current"
        self.stacks[threading.get_ident()] = self.here() - 1


class FakeCuda:
    """torch.cuda as it behaves: get_device_properties initialises CUDA (torch's _lazy_init), after
    which MPS's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is no longer read."""

    primary_contexts: ClassVar[set] = set()  # devices whose primary context exists (CUDA's, per process)

    def __init__(self, props, initialized: bool):
        self.props, self.initialized = props, initialized
        FakeCuda.primary_contexts.clear()

    def synchronize(self, device=None):
        self.initialized = True
        FakeCuda.primary_contexts.add(0 if device is None else device)

    def get_device_properties(self, device):
        self.initialized = True
        return self.props

    def is_initialized(self) -> bool:
        return self.initialized

    def current_device(self) -> int:
        self.initialized = True
        return 0


def fake_torch(sms=132, major=9, initialized=False):
    props = SimpleNamespace(multi_processor_count=sms, major=major, name="Fake H100")
    # autograd is torch's own, its tensors on the CPU: there the backward runs in the calling
    # thread, which stands for the CUDA device's autograd thread
    return SimpleNamespace(
        cuda=FakeCuda(props, initialized),
        get_num_threads=torch.get_num_threads,
        set_num_threads=torch.set_num_threads,
        autograd=torch.autograd,
        inference_mode=torch.inference_mode,
        enable_grad=torch.enable_grad,
        zeros=lambda *shape, device=None, **kw: torch.zeros(*shape, **kw),
    )


def limit(sm_limit, backend="green_context", torch_mod=None, **kw):
    """A ComputeLimit on the fake GPU whose properties a child process read (CUDA untouched here)."""
    torch_mod = torch_mod or fake_torch()
    return ComputeLimit(sm_limit, CUDA, backend, torch_mod=torch_mod, properties=lambda i: torch_mod.cuda.props, **kw)


CUDA = torch.device("cuda", 0)


def test_study_ratios():
    assert cpu_gpu_ratio(40, 80) == 0.5  # DGX-1 half-GPU point in the study
    assert cpu_gpu_ratio(40, 40) == 1.0
    with pytest.raises(ValueError):
        cpu_gpu_ratio(0, 8)


@pytest.mark.parametrize(
    "requested, major, granted",
    [(132, 9, 132), (66, 9, 72), (32, 9, 32), (1, 9, 8), (5, 8, 6), (1, 8, 4), (3, 7, 4), (130, 9, 132)],
)
def test_green_context_granularity(requested, major, granted):
    assert granted_sms(requested, 132, major) == granted


def test_cpu_limit_caps_and_restores_intra_op_threads():
    """From 3 threads (not the tests' one: conftest's session fixture sets 1, and a restore to 1
    from 1 would show nothing) to the limit's 1 and back."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        limit = ComputeLimit(1, torch.device("cpu"))
        assert (limit.grant.compute_unit, limit.grant.granted, limit.grant.total) == (
            "cpu_thread",
            1,
            len(usable_cpus()),
        )
        with limit:
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_cpu_limit_above_host_is_refused():
    with pytest.raises(ResourceError, match=r"sm_limit=\d+: this host has"):
        ComputeLimit(len(usable_cpus()) + 1, torch.device("cpu"))


def test_green_context_is_current_in_role_threads(monkeypatch):
    import torch.cuda.green_contexts as gc

    monkeypatch.setattr(gc, "GreenContext", FakeGreenContext)
    limit_ = limit(16)
    assert (limit_.grant.backend, limit_.grant.requested, limit_.grant.granted, limit_.grant.total) == (
        "green_context",
        16,
        16,
        132,
    )
    seen = []

    class Role:
        name = "learner"

        def run(self, stop):
            seen.append(FakeGreenContext.created[-1].here())

    with limit_:
        ctx = FakeGreenContext.created[-1]
        assert ctx.here() == 1, "current in the thread where autograd runs the device's backward"
        th = RoleThread(Role(), threading.Event(), limit_.thread_scope)
        th.start()
        th.join()
    assert seen == [1] and ctx.stack == 0, "popped in every thread it was made current in"
    assert ctx.num_sms == 16


def test_a_second_green_context_job_in_the_process_is_refused(monkeypatch):
    import torch.cuda.green_contexts as gc

    monkeypatch.setattr(gc, "GreenContext", FakeGreenContext)
    with limit(16), pytest.raises(ResourceError, match="sm_limit=32 .* another job of this process"), limit(32):
        pass
    with limit(32):  # the first one left: allowed again
        assert FakeGreenContext.created[-1].here() == 1


@pytest.mark.parametrize("mode", [contextlib.nullcontext, torch.no_grad, torch.inference_mode])
def test_in_autograd_thread_calls_once_from_a_backward_node(mode):
    nodes = []
    with mode():  # a limit entered inside no_grad or inference_mode still reaches the thread
        in_autograd_thread(torch, torch.device("cpu"), lambda: nodes.append(torch._C._current_autograd_node()))
    assert len(nodes) == 1 and nodes[0] is not None


def test_a_failed_jobs_sticky_cuda_error_is_not_replaced_on_exit(monkeypatch):
    import torch.cuda.green_contexts as gc

    monkeypatch.setattr(gc, "GreenContext", FakeGreenContext)

    def sticky():
        raise RuntimeError("CUDA error: device-side assert triggered")

    limit_ = limit(16)
    with pytest.raises(ValueError, match="the job's own"), limit_:
        FakeGreenContext.created[-1].pop_context = sticky
        raise ValueError("the job's own error")
    with pytest.raises(RuntimeError, match="device-side assert"), limit(16):  # with no error of its own, told
        FakeGreenContext.created[-1].pop_context = sticky


def test_sm_limit_above_the_gpu_is_refused():
    with pytest.raises(ResourceError, match="has 132 SMs"):
        limit(200)


def test_mps_refuses_without_daemon_and_sets_percentage_with_one(tmp_path):
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    with pytest.raises(ResourceError, match="no MPS control daemon"):
        limit(66, "mps", env=env)
    (tmp_path / "control").touch()
    fake = fake_torch()
    with limit(66, "mps", torch_mod=fake, env=env):
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env


def test_planning_mps_leaves_cuda_uninitialised_and_refuses_where_it_started(tmp_path, monkeypatch):
    """Validation and the plan read the SMs in a child process (here its answer is faked), so
    this process's CUDA stays uninitialised and the job's MPS variable still counts; where CUDA
    has started, the plan refuses (before any run exists), not the job's start."""
    import subprocess

    from rlbench.core import resources

    children = []

    def child(cmd, **kw):
        children.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="132 9 NVIDIA H100 80GB HBM3\n", stderr="")

    monkeypatch.setattr(resources.subprocess, "run", child)
    resources.cuda_properties.cache_clear()
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    (tmp_path / "control").touch()
    fake = fake_torch()
    ComputeLimit(66, CUDA, "mps", torch_mod=fake, env=env)  # validate's
    planned = ComputeLimit(66, CUDA, "mps", torch_mod=fake, env=env)  # the plan's: the cached answer
    resources.cuda_properties.cache_clear()
    assert len(children) == 1 and planned.grant.total == 132 and not fake.cuda.is_initialized()
    with planned:
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    with pytest.raises(ResourceError, match="sm_backend=mps needs a fresh process: CUDA is already initialised"):
        limit(66, "mps", torch_mod=fake_torch(initialized=True), env=env)  # at the plan, not on entering


def test_mps_on_a_cpu_device_is_refused():
    with pytest.raises(ResourceError, match="sm_backend=mps: MPS splits a CUDA GPU and this job's device is cpu"):
        ComputeLimit(1, torch.device("cpu"), "mps")


@pytest.mark.e2e
@pytest.mark.skipif(len(usable_cpus()) < 2, reason="needs 2 CPU threads to compare 1 with 2")
def test_sm_limit_changes_the_learners_threads_on_cpu(compose_cfg, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job
    from tests.conftest import CARTPOLE_TINY, runs

    for n in (1, 2):
        cfg = compose_cfg(
            [
                *CARTPOLE_TINY,
                "actors=2",
                f"sm_limit={n}",
                "progress=log",
                "device=cpu",  # a CUDA host too
                "telemetry.enabled=false",
                *store["overrides"],
            ]
        )
        final = run_job(job_of(cfg, [f"sm_limit={n}"]))
        assert final["learner_intra_op_threads"] == n
        assert final["sm_granted"] == n and final["cpu_gpu_ratio"] == pytest.approx(1 / n)
    by_name = {r.info.run_name: r for r in runs(store["uri"])}
    assert (
        by_name["sm_limit=2"].data.metrics["cpu_gpu_ratio"] == 0.5
        and "cpu_gpu_ratio" not in by_name["sm_limit=2"].data.params
    )  # a metric, not also a param
    assert by_name["sm_limit=2"].data.tags["compute_unit"] == "cpu_thread"
    # telemetry off: the energy a sweep's table leaves empty says why (not "no reason logged")
    assert "energy_per_task_j: telemetry.enabled=false" in by_name["sm_limit=2"].data.tags["unmeasured"]
    assert (
        final.get("energy_per_task_j") is None and "telemetry.enabled=false" in final["unmeasured"]["energy_per_task_j"]
    )


def test_a_limit_the_plan_refuses_leaves_no_run_and_no_store(tmp_path, compose_cfg, monkeypatch):
    """run_job plans (and so refuses a limit) before it opens the store or a run."""
    from rlbench.prepare import plan
    from rlbench.prepare.job import job_of
    from rlbench.prepare.validate import validate
    from rlbench.train.job import run_job
    from tests.conftest import CARTPOLE_TINY

    def refused(*a, **kw):
        raise ResourceError("sm_backend=mps needs a fresh process: CUDA is already initialised here")

    cfg = compose_cfg([*CARTPOLE_TINY, f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "tracking.experiment=test"])
    conf = validate(cfg)
    monkeypatch.setattr(plan, "ComputeLimit", refused)
    with pytest.raises(ResourceError, match="fresh process"):
        run_job(job_of(conf))
    assert list(tmp_path.iterdir()) == []
