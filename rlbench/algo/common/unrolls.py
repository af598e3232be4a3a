"""Central unroll assembly (SEED RL keeps it beside inference, not in the actors).

`UnrollAssembler` cuts each actor's stream of steps into sequences of `length` steps that
overlap by `overlap`, each with its first step's recurrent state and stack head, in per-actor
rings whose rows are copied once, straight into the sink. docs/algorithms.md, "Unroll assembly".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlbench.algo.common.frames import frame_shape, split_stack
from rlbench.algo.common.pages import small_pages


@dataclass
class Sequences:
    """A batch of k complete sequences, batch-major: [k, L, ...]."""

    frames: np.ndarray | list  # newest frame per step [k, L, *frame], or per row views that concatenate to L
    head: np.ndarray  # older frames of step 0's stack [k, stack - 1, *frame] (empty for stack 1)
    action: np.ndarray  # action taken at obs_t
    prev_action: np.ndarray  # network input at t: the actor's previous action
    reward: np.ndarray  # reward arriving with obs_t
    done: np.ndarray  # obs_t starts a new episode
    agent_out: np.ndarray  # the network's per-action output when it acted [k, L, A]: Q (R2D2), logits (V-trace)
    state: np.ndarray  # recurrent state before step 0, flattened: [k, S] (S = 0 without one)

    def __len__(self) -> int:
        return len(self.action)

    def rows(self, sl: slice) -> Sequences:
        """Rows `sl` of owned (array) sequences."""
        return Sequences(**{f: getattr(self, f)[sl] for f in FIELDS})

    def owned(self) -> Sequences:
        """A copy that owns all its arrays (frame pieces concatenated)."""
        f = self.frames
        frames = f.copy() if isinstance(f, np.ndarray) else np.stack([np.concatenate(r) for r in f])
        return Sequences(
            frames,
            *(
                getattr(self, n).copy()
                for n in ("head", "action", "prev_action", "reward", "done", "agent_out", "state")
            ),
        )


FIELDS = ("frames", "head", "action", "prev_action", "reward", "done", "agent_out", "state")


def concat(parts: list[Sequences]) -> Sequences:
    """Owned sequences, one after another."""
    if len(parts) == 1:
        return parts[0]
    return Sequences(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS})


def pop_rows(chunks, n: int) -> tuple[Sequences | None, np.ndarray]:
    """The oldest n rows of a deque of (owned Sequences, per-row tags) chunks, and their tags;
    a chunk split by the cut keeps its rest at the front. The queues between inference and a
    learner keep their unrolls so (R2D2's with initial priorities, V-trace's with policy
    versions). (None, empty) for n = 0; the caller holds the queue's lock and checks n."""
    parts, tags, need = [], [], n
    while need:
        seqs, tag = chunks.popleft()
        if len(seqs) > need:
            chunks.appendleft((seqs.rows(slice(need, None)), tag[need:]))
            seqs, tag = seqs.rows(slice(0, need)), tag[:need]
        parts.append(seqs)
        tags.append(tag)
        need -= len(seqs)
    if not parts:
        return None, np.zeros(0)
    return concat(parts), np.concatenate(tags)


class UnrollAssembler:
    """Per-actor rolling buffers that emit overlapping sequences."""

    def __init__(self, num_actors, length, overlap, obs_shape, obs_dtype, num_actions, state_size, stack=1, pad=0):
        """state_size: floats of flattened recurrent state per actor (0: none). pad: zero steps
        (zero frames, rewards, actions, outputs, done False) that start each actor's first
        sequence, from the initial (zero) recurrent state, as SEED RL's UnrollStore starts its
        index at the overlap (R2D2: the burn-in), so that the actor's first steps are trained."""
        if not 0 <= overlap <= length // 2:
            raise ValueError(f"overlap={overlap} must be in [0, length // 2 = {length // 2}]")
        if not 0 <= pad < length - overlap:
            raise ValueError(f"pad={pad} must be in [0, length - overlap = {length - overlap})")
        n, L = num_actors, length
        self.length, self.overlap, self.stride, self.stack = L, overlap, L - overlap, stack
        frame = frame_shape(obs_shape, stack)
        self.frames = small_pages((n, L, *frame), obs_dtype)  # 218 MB at 256 actors on Pong
        self.frames.fill(0)  # touch the pages here, not on the actors' path (docs/algorithms.md, "Unroll assembly")
        self.start_head = np.zeros((n, stack - 1, *frame), dtype=obs_dtype)
        self.next_start_head = np.zeros_like(self.start_head)
        self.action = np.zeros((n, L), dtype=np.int64)
        self.prev_action = np.zeros((n, L), dtype=np.int64)
        self.reward = np.zeros((n, L), dtype=np.float32)
        self.done = np.zeros((n, L), dtype=bool)
        self.agent_out = np.zeros((n, L, num_actions), dtype=np.float32)
        self.start_state = np.zeros((n, state_size), dtype=np.float32)
        self.next_start_state = np.zeros((n, state_size), dtype=np.float32)
        self.pad = pad
        self.pos = np.full(n, pad, dtype=np.int64)  # step index within the current sequence (the rings are zero)
        self.base = np.zeros(n, dtype=np.int64)  # ring column of the current sequence's step 0
        # index in the current sequence of its first step no sequence has emitted: the pad for a new
        # actor, the overlap once a sequence went out (its overlap steps went out with it)
        self.unsent_from = np.full(n, pad, dtype=np.int64)

    def needs_state(self, ids: np.ndarray) -> np.ndarray:
        """Mask of the actors whose state at this step starts a sequence (saves transfers)."""
        p = self.pos[ids]
        return (p == 0) | (p == self.stride)

    def add(self, ids, obs, action, prev_action, reward, done, agent_out, state, sink) -> int:
        """Append one step for actors `ids` (distinct); returns how many sequences completed.

        `state` ([k, S]) may hold only the rows selected by needs_state(ids), in order, or
        all k rows, or be None (no recurrent state). Completed sequences are passed to
        `sink(Sequences)`, which must copy what it keeps before returning.
        """
        p = self.pos[ids]
        col = (self.base[ids] + p) % self.length
        newest, heads = split_stack(obs, self.stack)
        self.frames[ids, col] = newest
        self._record_heads(ids, p, heads)
        self.action[ids, col] = action
        self.prev_action[ids, col] = prev_action
        self.reward[ids, col] = reward
        self.done[ids, col] = done
        self.agent_out[ids, col] = agent_out
        self._record_states(ids, p, state)
        self.pos[ids] = p + 1
        full = ids[p + 1 == self.length]
        if full.size:
            sink(self._completed(full))
            self._recycle(full)
        return int(full.size)

    def _record_heads(self, ids, p, heads) -> None:
        if self.stack == 1:
            return
        first, later = ids[p == 0], ids[p == self.stride]
        self.start_head[first] = heads[p == 0]
        self.next_start_head[later] = heads[p == self.stride]

    def _record_states(self, ids, p, state) -> None:
        need = (p == 0) | (p == self.stride)
        if state is None or not need.any():
            return
        rows = state if len(state) == need.sum() else state[need]
        first = p[need] == 0
        ids_need = ids[need]
        self.start_state[ids_need[first]] = rows[first]
        self.next_start_state[ids_need[~first]] = rows[~first]

    def _completed(self, ids: np.ndarray) -> Sequences:
        cols = (self.base[ids, None] + np.arange(self.length)) % self.length  # [k, L], in time order
        rows = ids[:, None]
        return Sequences(  # small fields: fancy-indexed copies; frames: views of the ring
            frames=[self._ring_pieces(i, b) for i, b in zip(ids.tolist(), self.base[ids].tolist(), strict=True)],
            head=self.start_head[ids],
            action=self.action[rows, cols],
            prev_action=self.prev_action[rows, cols],
            reward=self.reward[rows, cols],
            done=self.done[rows, cols],
            agent_out=self.agent_out[rows, cols],
            state=self.start_state[ids],
        )

    def _ring_pieces(self, i: int, b: int) -> tuple:
        return (self.frames[i],) if b == 0 else (self.frames[i, b:], self.frames[i, :b])

    def _recycle(self, ids: np.ndarray) -> None:
        """Start each finished actor's next sequence `stride` steps further round its ring."""
        if self.overlap:
            self.start_state[ids] = self.next_start_state[ids]
            self.start_head[ids] = self.next_start_head[ids]
        self.base[ids] = (self.base[ids] + self.stride) % self.length
        self.pos[ids] = self.overlap
        self.unsent_from[ids] = self.overlap

    def drop(self, ids) -> int:
        """Forget actors `ids`' unfinished sequences (their actor is gone): each ring goes back to
        a new actor's (pos = pad over zeros, base 0, zero start state and stack head), so the
        actor's next step starts a fresh sequence and no sequence ever mixes steps from before
        and after. SEED RL's UnrollStore.reset does the same when an env's run_id changes (its
        index back to the overlap over zeros; the learner resets the env's recurrent state).
        Returns the steps received from them that no sequence emitted (lost)."""
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        n = len(self.pos)
        if ids.size and (ids[0] < 0 or ids[-1] >= n):
            raise ValueError(f"drop ids={ids.tolist()}: allowed: actor ids in [0, {n})")
        lost = int((self.pos[ids] - self.unsent_from[ids]).sum())
        for ring in (
            self.frames,
            self.start_head,
            self.next_start_head,
            self.action,
            self.prev_action,
            self.reward,
            self.done,
            self.agent_out,
            self.start_state,
            self.next_start_state,
        ):
            ring[ids] = 0
        self.pos[ids] = self.unsent_from[ids] = self.pad
        self.base[ids] = 0
        return lost
