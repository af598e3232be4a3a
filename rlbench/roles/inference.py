"""Central inference (SEED RL): one batched forward for the actors that are ready.

Owns every env's recurrent state and previous action and runs the algorithm's acting policy
(forward, output handling, unroll assembly). Evaluation envs (ids >= `actors`) act but are
never assembled; `forget(ids)` resets envs whose actor process left. docs/algorithms.md.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import torch

from rlbench.core.hot_path import EAGER
from rlbench.core.precision import at_least_fp32
from rlbench.envs.vector import StepBatch
from rlbench.roles.contract import ActingPolicy
from rlbench.roles.hot_path import WARM_CALLS, bare_forward_s, inference_path
from rlbench.telemetry.flops import FlopRate
from rlbench.telemetry.timing import OpTimer


class InferenceServer:
    def __init__(
        self,
        policy: ActingPolicy,
        device,
        num_envs: int,
        actors: int,
        timer: OpTimer | None = None,
        hot_path: str = EAGER,
        batch: int | None = None,
    ):
        """hot_path: the forward's mode (rlbench/core/hot_path.py); batch: the envs per forward
        the job's env hands it (a CUDA graph is captured at that size; default num_envs)."""
        self.policy, self.device, self.actors = policy, device, actors
        net = policy.shared.net if policy.shared is not None else None
        self.forward = inference_path(hot_path, net, batch or num_envs) if net is not None else None
        self.state = policy.initial_state(num_envs, device) if policy.shared is not None else ()
        self.prev_action = np.zeros(num_envs, dtype=np.int64)
        self.timer = timer or OpTimer("inference")
        self.batches = 0
        self.batch_items = 0
        self.latency_s = 0.0
        self.warm_s, self.warm_items = 0.0, 0  # the first WARM_CALLS calls (a compile, a capture): out of the overhead
        self._obs: np.ndarray | None = None  # the last batch's observations: the reference forward's shape and dtype
        self._store_s = 0.0  # time inside the policy's store, kept out of "unroll_assembly"
        self.flops = FlopRate()  # the forwards' model FLOPs per env (counted once) and their time
        actions = policy.unrolls.agent_out.shape[-1] if policy.unrolls is not None else 0
        self._no_out = np.zeros((num_envs, actions), np.float32)

    @property
    def policy_version(self) -> int:
        return self.policy.shared.version if self.policy.shared is not None else 0

    def step(self, batch: StepBatch) -> np.ndarray:
        t0 = time.perf_counter()
        ids = batch.env_ids
        train = ids < self.actors
        out, states = self._forward(batch, train) if self.policy.shared is not None else (None, None)
        actions = self.policy.act(ids, out)
        if self.policy.unrolls is not None:
            self._assemble(batch, actions, out, states, train)
        self.prev_action[ids] = actions
        self.batches += 1
        self.batch_items += len(ids)
        self.latency_s += time.perf_counter() - t0
        if self.batches <= WARM_CALLS:
            self.warm_s, self.warm_items = self.latency_s, self.batch_items
        self._obs = batch.obs
        return actions

    def forget(self, ids: np.ndarray) -> int:
        """Envs `ids` start over as new actors: zero recurrent state (the initial state) and
        previous action, their unfinished unrolls dropped (training envs; eval envs have none).
        Returns the steps inference received from them that no unroll emitted (lost). Called
        by the actors' thread between two steps, so no lock is needed."""
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        n = len(self.prev_action)
        if ids.size and (ids[0] < 0 or ids[-1] >= n):
            raise ValueError(f"forget ids={ids.tolist()}: allowed: env ids in [0, {n})")
        if ids.size and self.state:
            rows = torch.as_tensor(ids, device=self.device)
            for s, s0 in zip(self.state, self.policy.initial_state(ids.size, self.device), strict=True):
                s[rows] = s0
        self.prev_action[ids] = 0
        train = ids[ids < self.actors]
        if self.policy.unrolls is None or not train.size:
            return 0
        return self.policy.unrolls.drop(train)

    def _assemble(self, batch: StepBatch, actions, out, states, train: np.ndarray) -> None:
        """The training environments' step into the unroll assembler (its sink stores)."""
        t0, storing = time.perf_counter(), self._store_s
        rows = slice(None) if train.all() else train
        ids = batch.env_ids[rows]
        if out is None:  # no network: nothing per action to keep (zeros, allocated once)
            out = self._no_out[: len(batch.env_ids)]
        self.policy.unrolls.add(
            ids,
            batch.obs[rows],
            actions[rows],
            self.prev_action[ids],
            batch.reward[rows],
            batch.done[rows],
            out[rows],
            states,
            sink=self._store,
        )
        self.timer.add("unroll_assembly", time.perf_counter() - t0 - (self._store_s - storing))

    def _forward(self, batch: StepBatch, train: np.ndarray):
        ids_np = batch.env_ids
        with self.timer.op("h2d_transfer"):
            ids = torch.as_tensor(ids_np, device=self.device)
            obs = torch.as_tensor(batch.obs, device=self.device).unsqueeze(0)
            prev = torch.as_tensor(self.prev_action[ids_np], device=self.device).unsqueeze(0)
            reward = torch.as_tensor(batch.reward, device=self.device).unsqueeze(0)
            done = torch.as_tensor(batch.done, device=self.device).unsqueeze(0)
        state = _zero_where_done(tuple(s[ids] for s in self.state), done[0])
        shared = self.policy.shared
        # the rate's time runs to the outputs on the host (a CUDA forward is asynchronous until then)
        with self.flops.call(len(ids_np)):
            with self.timer.op("forward", device=True), shared.lock, torch.no_grad(), shared.amp.autocast():
                out, new_state = self.forward(obs, prev, reward, done, state)
            for s, s1 in zip(self.state, new_state, strict=True):
                s[ids] = s1
            with self.timer.op("d2h_transfer"):
                out = at_least_fp32(out[0]).cpu().numpy()
        return out, self._unroll_start_states(ids_np, train, state)

    def _unroll_start_states(self, ids_np: np.ndarray, train: np.ndarray, state: tuple) -> np.ndarray | None:
        """The states (as each env had it before this step) of the envs whose step starts an
        unroll, flattened [k, S]; only those cross to the host. None on a step where no unroll
        starts (most steps): no device work then, and no wait for it. Rows are picked by index,
        not by a mask, which on CUDA would wait for the device to count them."""
        if self.policy.unrolls is None or not state:
            return None
        need = np.zeros(len(ids_np), bool)
        need[train] = self.policy.unrolls.needs_state(ids_np[train])
        rows = np.flatnonzero(need)
        if not rows.size:
            return None
        index = torch.as_tensor(rows, device=self.device)
        return torch.cat([s.index_select(0, index).flatten(1) for s in state], dim=1).cpu().numpy()

    def _store(self, seqs) -> None:
        """The assembler's sink: the policy stores the completed unrolls (its own ops)."""
        t0 = time.perf_counter()
        self.policy.store(seqs, self.timer)
        self._store_s += time.perf_counter() - t0

    def efficiency(self) -> tuple[dict, dict]:
        """(metrics, null reasons): inference_tflops, the forwards' achieved model FLOP/s."""
        if self.policy.shared is None:
            return {}, {}
        tflops = self.flops.tflops()
        if tflops is None:
            return {}, {"inference_tflops": self.flops.why_null("central-inference forward")}
        return {"inference_tflops": tflops}, {}

    def hot_path_tags(self) -> dict[str, str]:
        """The mode the forward ran in, and why it fell back to eager if it did (roles/hot_path.py)."""
        return self.forward.tags() if self.forward is not None else {}

    def overhead(self, scope=contextlib.nullcontext) -> tuple[dict, dict]:
        """(metrics, null reasons) after the task: the bare forward at the calls' mean batch
        (inference_forward_ms, timed in a thread under `scope`, as a role runs) and
        inference_overhead: the calls' mean latency, the first WARM_CALLS left out, over it."""
        names = ("inference_forward_ms", "inference_forward_batch", "inference_overhead")
        calls = self.batches - WARM_CALLS
        why = (
            "no network: this algorithm acts without a forward"
            if self.forward is None
            else f"{self.batches} inference call(s): the first {WARM_CALLS} are warm-up, none left to compare"
            if calls < 1
            else None
        )
        if why is not None:
            return {}, dict.fromkeys(names, why)
        n = max(1, round((self.batch_items - self.warm_items) / calls))
        done: list = []
        thread = threading.Thread(target=lambda: done.append(self._bare_forward_s(n, scope)), name="bare-forward")
        thread.start()
        thread.join()
        if not done or isinstance(done[0], str):
            return {}, dict.fromkeys(names, done[0] if done else "the reference forward did not finish")
        ms, latency_ms = 1e3 * done[0], 1e3 * (self.latency_s - self.warm_s) / calls
        return {"inference_forward_ms": ms, "inference_forward_batch": n, "inference_overhead": latency_ms / ms}, {}

    def _bare_forward_s(self, n: int, scope) -> float | str:
        """The network's eager forward alone on `n` envs' inputs already on the device (random
        observations of the last batch's shape and dtype, zero state), as `_forward` runs it;
        the reason as a string where it fails."""
        shared, obs = self.policy.shared, torch.from_numpy(np.ascontiguousarray(self._obs[:1]))
        gen, shape = torch.Generator().manual_seed(0), (1, n, *obs.shape[1:])
        x = (
            torch.randint(0, 256, shape, generator=gen)
            if obs.dtype == torch.uint8
            else torch.randn(shape, generator=gen)
        )
        row = {t: torch.zeros(1, n, dtype=t, device=self.device) for t in (torch.int64, torch.float32, torch.bool)}
        args = (x.to(obs.dtype).to(self.device), row[torch.int64], row[torch.float32], row[torch.bool])
        state = self.policy.initial_state(n, self.device)

        def forward():
            with shared.lock, torch.no_grad(), shared.amp.autocast():
                return shared.net(*args, state)

        try:
            with scope():
                return bare_forward_s(forward, lambda out: at_least_fp32(out[0][0]).cpu())
        except Exception as e:  # the job's numbers stand; this one is unknown, with why
            return f"the reference forward failed: {type(e).__name__}: {e}"[:250]

    def stats(self) -> dict:
        b = max(self.batches, 1)
        return {
            "inference_batch_mean": self.batch_items / b,
            "inference_latency_ms": 1e3 * self.latency_s / b,
            "policy_version": self.policy_version,
        }


def _zero_where_done(state: tuple, done: torch.Tensor) -> tuple:
    """Each env's state, zeroed where its observation starts a new episode."""
    keep = (~done).float()
    return tuple(s * keep.reshape(-1, *([1] * (s.dim() - 1))) for s in state)
