"""Central unroll assembly (SEED RL keeps it beside inference, not in the actors).

Each actor's stream of steps is cut into sequences of `length` = burn_in + seq_len steps;
consecutive sequences of one actor overlap by `overlap` steps, so the next sequence's
burn-in replays the end of the previous one. Every sequence carries the recurrent state
the inference network had when it processed the sequence's first step.

Buffers are preallocated per actor; a batch of steps for any subset of actors is written
with one fancy-indexed copy per field, and completed sequences are returned as copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Sequences:
    """A batch of k complete sequences, batch-major: [k, L, ...]."""

    obs: np.ndarray
    action: np.ndarray  # action taken at obs_t
    prev_action: np.ndarray  # network input at t: the actor's previous action
    reward: np.ndarray  # reward arriving with obs_t
    done: np.ndarray  # obs_t starts a new episode
    q: np.ndarray  # inference-time Q values [k, L, A], for initial priorities
    state: np.ndarray  # recurrent state before step 0: [k, 2, H] (h, c)

    def __len__(self) -> int:
        return self.obs.shape[0]


class UnrollAssembler:
    """Per-actor rolling buffers that emit overlapping sequences."""

    def __init__(self, num_actors, length, overlap, obs_shape, obs_dtype, num_actions, state_size):
        if not 0 <= overlap <= length // 2:
            raise ValueError(f"overlap={overlap} must be in [0, length // 2 = {length // 2}]")
        n, L = num_actors, length
        self.length, self.overlap, self.stride = L, overlap, L - overlap
        self.obs = np.zeros((n, L, *obs_shape), dtype=obs_dtype)
        self.action = np.zeros((n, L), dtype=np.int64)
        self.prev_action = np.zeros((n, L), dtype=np.int64)
        self.reward = np.zeros((n, L), dtype=np.float32)
        self.done = np.zeros((n, L), dtype=bool)
        self.q = np.zeros((n, L, num_actions), dtype=np.float32)
        self.start_state = np.zeros((n, 2, state_size), dtype=np.float32)
        self.next_start_state = np.zeros((n, 2, state_size), dtype=np.float32)
        self.pos = np.zeros(n, dtype=np.int64)

    def needs_state(self, ids: np.ndarray) -> np.ndarray:
        """Mask of the actors whose state at this step starts a sequence (saves transfers)."""
        p = self.pos[ids]
        return (p == 0) | (p == self.stride)

    def add(self, ids, obs, action, prev_action, reward, done, q, state=None) -> Sequences | None:
        """Append one step for actors `ids` (distinct). state: [k, 2, H] or rows for needs_state.

        `state` may hold only the rows selected by needs_state(ids) (in order), or all k rows.
        Returns the sequences completed by this step, or None.
        """
        p = self.pos[ids]
        self.obs[ids, p] = obs
        self.action[ids, p] = action
        self.prev_action[ids, p] = prev_action
        self.reward[ids, p] = reward
        self.done[ids, p] = done
        self.q[ids, p] = q
        self._record_states(ids, p, state)
        self.pos[ids] = p + 1
        full = ids[p + 1 == self.length]
        return self._emit(full) if full.size else None

    def _record_states(self, ids, p, state) -> None:
        need = (p == 0) | (p == self.stride)
        if state is None or not need.any():
            return
        rows = state if len(state) == need.sum() else state[need]
        first = p[need] == 0
        ids_need = ids[need]
        self.start_state[ids_need[first]] = rows[first]
        self.next_start_state[ids_need[~first]] = rows[~first]

    def _emit(self, ids: np.ndarray) -> Sequences:
        out = Sequences(
            obs=self.obs[ids].copy(),
            action=self.action[ids].copy(),
            prev_action=self.prev_action[ids].copy(),
            reward=self.reward[ids].copy(),
            done=self.done[ids].copy(),
            q=self.q[ids].copy(),
            state=self.start_state[ids].copy(),
        )
        keep = self.overlap
        if keep:
            for buf in (self.obs, self.action, self.prev_action, self.reward, self.done, self.q):
                buf[ids, :keep] = buf[ids, self.length - keep :]
            self.start_state[ids] = self.next_start_state[ids]
        self.pos[ids] = keep
        return out
