"""Greedy evaluation environments: same central inference, never trained on, not counted."""

import numpy as np
import torch

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.algo.r2d2.acting import EpsilonGreedy
from rlbench.algo.r2d2.config import NetworkConfig, Schema
from rlbench.algo.r2d2.network import R2D2Net
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import unroll_layout
from rlbench.envs.vector import StepBatch
from rlbench.roles.actors import ActorRole
from rlbench.roles.contract import SharedNet
from rlbench.roles.inference import InferenceServer

ACTORS, EVAL, OBS, ACTIONS = 3, 2, (4,), 2


def _server():
    algo = Schema(burn_in=1, seq_len=3, network=NetworkConfig(torso="mlp", mlp_hidden=8, lstm_hidden=8, head_hidden=8))
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    torch.manual_seed(0)
    net = R2D2Net(OBS, ACTIONS, algo.network)
    asm = UnrollAssembler(ACTORS, length, overlap, OBS, np.float32, ACTIONS, 16)
    replay = SequenceReplay.for_shapes(100, length, OBS, np.float32, ACTIONS, 16, alpha=1.0, beta=1.0, seed=0)
    eps = np.concatenate([np.full(ACTORS, 1.0), np.full(EVAL, 0.0)])  # actors: random; eval: greedy
    policy = EpsilonGreedy(SharedNet(net), asm, replay, eps, algo, seed=0)
    return InferenceServer(policy, "cpu", ACTORS + EVAL, actors=ACTORS), policy


def _batch(ids, t, done=False):
    ids = np.asarray(ids)
    obs = np.stack([np.full(OBS, 100 * i + t, np.float32) for i in ids])
    return StepBatch(ids, obs, np.ones(len(ids), np.float32), np.full(len(ids), done))


def test_eval_envs_act_greedily_and_are_never_assembled_or_inserted():
    server, policy = _server()
    net, replay = policy.shared.net, policy.replay
    first = _batch([4, 2, 0, 3], 0, done=True)  # episode starts: zero state, as the learner's burn-in starts
    actions = server.step(first)
    with torch.no_grad():
        zeros = torch.zeros(4, 8)
        q, _ = net(
            torch.as_tensor(first.obs)[None],
            torch.zeros(1, 4, dtype=torch.long),
            torch.as_tensor(first.reward)[None],
            torch.as_tensor(first.done)[None],
            (zeros, zeros),
        )
    is_eval = first.env_ids >= ACTORS  # epsilon 0: exactly the argmax of the shared network's Q values
    np.testing.assert_array_equal(actions[is_eval], q[0].argmax(-1).numpy()[is_eval])
    for t in range(1, 20):
        server.step(_batch([0, 3, 1, 4, 2] if t % 2 else [4, 2, 0], t))  # eval ids mixed in, any order
    assert replay.inserted > 0
    stored = replay._store["frames"][: replay.size]
    assert (stored // 100 < ACTORS).all()  # every stored frame came from a training actor
    assert policy.unrolls.frames.shape[0] == ACTORS


def test_actor_role_counts_only_training_frames_and_keeps_eval_returns_apart():
    class Env:
        frameskip = 4

    role = ActorRole(Env(), inference=None, actors=ACTORS, frame_target=10**6, seed=0, eval_envs=EVAL)
    role._account(StepBatch(np.array([0, 1, 2, 3, 4]), None, np.array([1, 1, 1, 5, 5], np.float32), np.zeros(5, bool)))
    role._account(StepBatch(np.array([1, 4]), None, np.array([2, 7], np.float32), np.array([True, True])))
    assert (role.steps, role.frames, role.eval_frames) == (4, 16, 12)
    assert list(role.episode_returns) == [(16, 3.0)] and list(role.eval_returns) == [(16, 12.0)]
    assert role.episodes == 1
