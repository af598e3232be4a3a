"""Frames stored once per step, stacks rebuilt at sampling exactly as the actors saw them."""

import numpy as np
import torch

from rlbench.algo.common.frames import rebuild_stacks, split_stack
from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.algo.r2d2.acting import EpsilonGreedy
from rlbench.algo.r2d2.config import Schema
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import sequence_starts, unroll_layout
from rlbench.envs.atari.family import Schema as AtariEnv
from rlbench.envs.atari.vector_env import AtariActors
from rlbench.roles.contract import SharedNet
from rlbench.roles.inference import InferenceServer


class _ConstantQ(torch.nn.Module):
    """Zero Q values and a one-float state: acting with epsilon 1 is uniform random."""

    def __init__(self, num_actions: int):
        super().__init__()
        self.num_actions = num_actions

    def initial_state(self, n: int, device=None) -> tuple:
        return (torch.zeros(n, 1, device=device),)

    def forward(self, obs, prev_action, reward, done, state):
        return torch.zeros(*done.shape, self.num_actions), state


def test_rebuild_zeroes_frames_from_before_an_episode_start():
    # one pixel per frame; head = frames -2, -1; newest frames 1..5; episode starts at step 3
    head = torch.tensor([[[7], [8]]], dtype=torch.uint8)  # [B=1, stack-1=2, 1]
    frames = torch.tensor([[[1], [2], [3], [4], [5]]], dtype=torch.uint8)
    done = torch.tensor([[False, False, False, True, False]])
    got = rebuild_stacks(head, frames, done)[0, :, :, 0].tolist()
    assert got == [[7, 8, 1], [8, 1, 2], [1, 2, 3], [0, 0, 4], [0, 4, 5]]


def test_stack_of_one_is_the_observation_itself():
    obs = np.arange(12, dtype=np.float32).reshape(3, 4)
    newest, head = split_stack(obs, 1)
    assert newest is obs and head.shape == (3, 0, 4)
    frames = torch.from_numpy(obs).reshape(1, 3, 4)
    assert torch.equal(rebuild_stacks(torch.from_numpy(head[:1]), frames, torch.zeros(1, 3, dtype=torch.bool)), frames)


def test_rebuilt_stacks_equal_what_inference_received_from_ale():
    """Real Pong through central inference (R2D2's store, a constant-Q network: random actions),
    the assembler and replay; short
    truncated episodes put episode starts inside sequences and inside stack heads."""
    env = AtariActors(AtariEnv(id="pong", max_episode_frames=4 * 37), 2, 1, 0)
    algo = Schema(burn_in=4, seq_len=8)
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    asm = UnrollAssembler(2, length, overlap, env.obs_shape, np.uint8, env.num_actions, 1, stack=4)
    replay = SequenceReplay.for_shapes(
        200, length, env.obs_shape, np.uint8, env.num_actions, 1, 4, alpha=1.0, beta=1.0, seed=0
    )
    policy = EpsilonGreedy(SharedNet(_ConstantQ(env.num_actions)), asm, replay, np.ones(2), algo, seed=0)
    inference = InferenceServer(policy, "cpu", 2, actors=2)
    seen = {0: [], 1: []}
    batch = env.reset(seed=3)
    steps = 150
    for _ in range(steps):
        for i, o in zip(batch.env_ids.tolist(), batch.obs, strict=True):
            seen[i].append(o.copy())
        env.send(inference.step(batch))
        batch = env.recv()
    env.close()
    starts = sequence_starts(steps, length, overlap)
    assert replay.size == 2 * len(starts) >= 30
    rows = {f: torch.from_numpy(replay._store[f][: replay.size]) for f in ("head", "frames", "done")}
    rebuilt = rebuild_stacks(rows["head"], rows["frames"], rows["done"]).numpy()
    assert rows["done"][:, 1:].any() and rows["done"][:, 1:].sum() < rows["done"].numel()  # starts inside
    for n, start in enumerate(starts):
        for actor in (0, 1):  # lock-step: both actors complete together, in id order
            expected = np.stack(seen[actor][start : start + length])
            np.testing.assert_array_equal(rebuilt[2 * n + actor], expected)
    old = length * 4 * 84 * 84  # what a sequence of 4-frame stacks took
    assert replay.nbytes() / replay.capacity < old / 3
