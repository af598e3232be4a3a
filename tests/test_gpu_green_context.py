"""On a CUDA host only: a job's green context holds in every thread that runs its CUDA work.

Autograd runs a CUDA device's backward ops in its own engine thread. Before the fix the
learner's backward ran there in the primary context, on a null stream torch took for the green
context's: on an H200 the SM sweep's jobs hit index-out-of-bounds asserts in inference after two
updates (docs/results/h200-sms.md, 2026-11-26). Marked `gpu` (pytest -m gpu); skipped without CUDA, as in CI.
"""

import ctypes
import threading
from typing import ClassVar

import pytest
import torch

from rlbench.core.resources import ComputeLimit

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def current_context() -> int:
    libcuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    assert libcuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    return ctx.value or 0


class Seen(torch.autograd.Function):
    """Identity whose backward notes the CUDA context current where it runs."""

    contexts: ClassVar[list] = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        Seen.contexts.append(current_context())
        return grad


def test_the_backward_runs_in_the_jobs_green_context():
    device = torch.device("cuda", 0)
    torch.zeros(1, device=device)
    primary = current_context()
    forward_ctx = []
    with ComputeLimit(16, device) as limit:

        def learner():
            with limit.thread_scope():
                forward_ctx.append(current_context())
                x = torch.ones(8, device=device, requires_grad=True)
                Seen.apply(x).sum().backward()
                torch.cuda.synchronize()

        th = threading.Thread(target=learner)
        th.start()
        th.join()
    assert forward_ctx and forward_ctx[0] != primary
    assert Seen.contexts[-1] == forward_ctx[0], "the backward ran outside the green context"
    Seen.apply(torch.ones(1, device=device, requires_grad=True)).sum().backward()
    assert Seen.contexts[-1] == primary, "the autograd thread left in the green context after the job"


def test_learner_and_inference_threads_under_a_green_context_do_not_race():
    """A learner's updates and an inference's gathers side by side for 3 s, as the roles run."""
    device = torch.device("cuda", 0)
    stop, errors = threading.Event(), []
    with ComputeLimit(32, device) as limit:
        net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 6)).to(device)
        opt = torch.optim.Adam(net.parameters())
        state = torch.zeros(256, 512, device=device)

        def learner():
            while not stop.is_set():
                loss = net(torch.randn(1024, 512, device=device)).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

        def inference():
            while not stop.is_set():
                ids = torch.as_tensor(torch.randperm(256)[:64].numpy(), device=device)
                with torch.no_grad():
                    state[ids] = torch.tanh(state[ids] + 1)
                    net(state[ids]).cpu()

        def scoped(fn):
            def run():
                try:
                    with limit.thread_scope():
                        fn()
                        torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - told below
                    errors.append(e)
                    stop.set()

            return run

        threads = [threading.Thread(target=scoped(f)) for f in (learner, inference)]
        for th in threads:
            th.start()
        stop.wait(3.0)
        stop.set()
        for th in threads:
            th.join()
    assert not errors, errors
