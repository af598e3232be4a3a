"""A role's hot function in its mode (rlbench/core/hot_path.py): eager, torch.compile, a CUDA graph.

`HotPath` runs the fast form and, where it fails at run time, eager from then on, with one
logged line and tags saying so. `GraphForward`: the inference forward captured at one batch
size; `bare_forward_s`: the reference forward's timing. docs/hot_path.md.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from rlbench.core.hot_path import COMPILE, CUDA_GRAPHS, EAGER

log = logging.getLogger(__name__)
WARM_CALLS = 2  # calls left out of a timing: a compile, a capture, the allocator's first sizes


class HotPath:
    """`eager(*args)`, or what `make_fast()` returns (built at the first call) in mode `mode`."""

    def __init__(self, role: str, mode: str, eager: Callable, make_fast: Callable[[], Callable]):
        self.role, self.mode, self.eager, self._make_fast = role, mode, eager, make_fast
        self._fast: Callable | None = None
        self.fallback: str | None = None  # why the mode failed at run time; eager since

    @property
    def ran(self) -> str:
        """The mode that runs now: `mode`, or eager after a fallback."""
        return EAGER if self.fallback is not None else self.mode

    def __call__(self, *args):
        if self.ran == EAGER:
            return self.eager(*args)
        try:
            if self._fast is None:
                self._fast = self._make_fast()
            return self._fast(*args)
        except Exception as e:  # a compile or capture that fails: eager from now on, said once
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.fallback = f"{type(e).__name__}: {first}"[:250]
            log.warning(
                "hot_path.%s=%s failed at run time; running eager from now on (%s)", self.role, self.mode, self.fallback
            )
            return self.eager(*args)

    def tags(self) -> dict[str, str]:
        """`hot_path/<role>`: the mode that ran last; `hot_path/<role>_fallback`: why it fell back."""
        tags = {f"hot_path/{self.role}": self.ran}
        if self.fallback is not None:
            tags[f"hot_path/{self.role}_fallback"] = f"{self.mode} failed at run time, eager since: {self.fallback}"
        return tags


def compiled(fn: Callable, mode: str, compiler: Callable | None = None) -> Callable:
    """torch.compile of `fn` in its default mode (`compile`) or mode="reduce-overhead"."""
    return (compiler or torch.compile)(fn, mode=None if mode == COMPILE else mode)


def inference_path(mode: str, net: Callable, batch: int, compiler=None, capture=None) -> HotPath:
    """Central inference's forward `net(obs, prev, reward, done, state)` in `mode`."""
    if mode == CUDA_GRAPHS:
        return HotPath("inference", mode, net, lambda: GraphForward(net, batch, capture))
    # its forward method, not the module: FlopCounterMode's global module hooks (the first call is
    # counted) would make torch.compile(module) warn that they fire twice
    return HotPath("inference", mode, net, lambda: compiled(getattr(net, "forward", net), mode, compiler))


def learner_path(mode: str, loss: Callable, grads: Callable, compiler=None) -> HotPath:
    """A learner's `grads(loss, *args)` (its loss, backward and clipping) with `loss` compiled in
    `mode`: a backward that fails (compiled at its first call) falls back as the forward does."""
    return HotPath("learner", mode, partial(grads, loss), lambda: partial(grads, compiled(loss, mode, compiler)))


def cuda_capture(fn: Callable[[], None], device) -> Callable[[], None]:
    """CUDA graph capture of `fn` on `device` (after 3 warm-up calls on a side stream, as
    torch's docs do); returns the graph's replay."""
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
    return graph.replay


class GraphForward:
    """`net`'s forward captured at batch `batch` (its first call of that size); other sizes run
    eager. Inputs are copied into the graph's own; the outputs are the graph's, overwritten by
    the next call (central inference copies them out before it)."""

    def __init__(self, net: Callable, batch: int, capture: Callable | None = None):
        self.net, self.batch, self.capture = net, batch, capture or cuda_capture
        self.static: tuple | None = None
        self.out: dict = {}
        self.replay: Callable[[], None] | None = None

    def __call__(self, obs, prev, reward, done, state):
        args = (obs, prev, reward, done, *state)
        if obs.shape[1] != self.batch:
            return self.net(obs, prev, reward, done, state)
        if self.replay is None:
            self.static = tuple(a.clone() for a in args)
            self.replay = self.capture(self._run, obs.device)
        for dst, src in zip(self.static, args, strict=True):
            dst.copy_(src)
        self.replay()
        return self.out["value"]

    def _run(self) -> None:
        obs, prev, reward, done, *state = self.static
        self.out["value"] = self.net(obs, prev, reward, done, tuple(state))


def bare_forward_s(forward: Callable[[], object], to_host: Callable[[object], object], repeats: int = 20) -> float:
    """Mean wall seconds of `forward()` alone, as central inference's latency is timed (perf_counter,
    ended by `to_host` of its outputs), after WARM_CALLS untimed calls."""
    times = []
    for k in range(repeats + WARM_CALLS):
        t0 = time.perf_counter()
        to_host(forward())
        if k >= WARM_CALLS:
            times.append(time.perf_counter() - t0)
    return statistics.fmean(times)
