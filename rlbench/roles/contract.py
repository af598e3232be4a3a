"""What the trainer hands an algorithm (`AlgoContext`) and what it gets back (`AlgoParts`).

The trainer calls `rlbench.core.algorithms.algorithm(name).build(ctx)` and wires the parts into the
generic roles: `policy` into central inference, `learner` as a role thread, `may_step` and
`more_data` into the actors, `metrics` into the step and final metrics. docs/algorithms.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rlbench.core.hot_path import AUTO, memory_format
from rlbench.core.precision import DEFAULT, Amp
from rlbench.envs.spec import EnvSpec
from rlbench.telemetry.timing import OpTimer


@dataclass
class AlgoContext:
    conf: Any  # the validated rlbench.config.schema.Config; conf.algo is the algorithm's Schema
    spec: EnvSpec  # the env's shapes (the built env agrees with it)
    device: Any  # torch.device of inference and the learner
    actors: int  # the actors' training environments (the config's `actors`): ids [0, actors)
    num_eval: int  # evaluation environments: ids [actors, actors + num_eval)
    actors_done: threading.Event  # set when the actors met the task's frames (or stopped)
    timer: Callable[[str], OpTimer] = OpTimer  # makes a role's timer: the learner's is timer("learner")
    amp: Amp | None = None  # the job's precision (rlbench/core/precision.py); None: from conf.precision and the device

    def __post_init__(self):
        if self.amp is None:
            self.amp = Amp(getattr(self.conf, "precision", DEFAULT), getattr(self.device, "type", str(self.device)))

    @property
    def memory_format(self) -> str:
        """The torso's layout on this job's device (`hot_path.memory_format` resolved)."""
        setting = getattr(getattr(self.conf, "hot_path", None), "memory_format", AUTO)
        return memory_format(setting, getattr(self.device, "type", str(self.device)))

    def place(self, net):
        """`net` on the job's device, each module that has a layout to set (a convolutional
        torso's `set_memory_format`) in the job's memory format."""
        net = net.to(self.device)
        for m in net.modules():
            if hasattr(m, "set_memory_format"):
                m.set_memory_format(self.memory_format)
        return net


def layout_of(net) -> str | None:
    """The memory format `net`'s convolutional torso runs in (AlgoContext.place set it); None
    for a network without one (an MLP torso)."""
    return next((m.memory_format for m in net.modules() if hasattr(m, "set_memory_format")), None)


class SharedNet:
    """The acting copy of a network: central inference reads it, the learner publishes into
    it; both under its lock. `version` is the learner update whose weights it holds; `amp` the
    precision central inference runs it at (autocast around its forward)."""

    def __init__(self, net, amp: Amp | None = None):
        self.net, self.version = net, 0
        self.amp = amp or Amp()
        self.lock = threading.Lock()

    def publish(self, state_dict, version: int) -> None:
        with self.lock:
            self.net.load_state_dict(state_dict)
            self.version = version


class ActingPolicy(Protocol):
    """What central inference does with the network (rlbench/roles/inference.py).

    `shared.net(obs, prev_action, reward, done, state) -> (out [T, B, A], state)` with obs etc.
    [T, B, ...] and state a tuple of [B, ...] tensors (empty: no recurrent state); a done
    zeroes the state before its step (inference does that for the state it keeps)."""

    shared: SharedNet | None  # None: no network (actions need no forward)
    unrolls: Any  # rlbench.algo.common.unrolls.UnrollAssembler of the training envs, or None

    def initial_state(self, n: int, device) -> tuple: ...
    def act(self, ids: np.ndarray, out: np.ndarray | None) -> np.ndarray: ...
    def store(self, seqs, timer) -> None: ...


@dataclass
class AlgoParts:
    policy: ActingPolicy
    learner: Any = None  # a role (rlbench.roles.learner.LearnerLoop) or None
    may_step: Callable[[], bool] | None = None  # actors step only while it is True
    metrics: Callable[[bool], dict] = lambda final: {}  # the buffer's metrics; final=True at the end
    more_data: Callable[[], bool] | None = None  # actors step on past the task's frames while it is True
    release: Callable[[], None] | None = (
        None  # after a job that ended well: keep for the next job (R2D2: replay's memory)
    )
    ready: Callable[[], None] | None = None  # before the actors' first step: what build() began is done
