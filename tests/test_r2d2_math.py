"""R2D2 math against hand-computed values."""

import itertools
import math

import numpy as np
import pytest
import torch

from rlbench.algo.r2d2.math import (
    inverse_value_rescale,
    mixed_priority,
    n_step_double_q_targets,
    n_step_returns,
    sequence_loss,
    value_rescale,
)
from rlbench.algo.r2d2.sequences import (
    actor_epsilons,
    importance_weights,
    sequence_starts,
    sequences_per_actor,
    unroll_layout,
)


def test_value_rescale_hand_values():
    x = torch.tensor([0.0, 3.0, -8.0, 99.0])
    # h(3) = sqrt(4) - 1 + 0.003 = 1.003; h(-8) = -(3 - 1) - 0.008; h(99) = 10 - 1 + 0.099
    expected = torch.tensor([0.0, 1.003, -2.008, 9.099])
    assert torch.allclose(value_rescale(x, 1e-3), expected, atol=1e-6)


def test_inverse_value_rescale_roundtrip_and_hand_value():
    x = torch.linspace(-500, 500, 1001, dtype=torch.float64)
    assert torch.allclose(inverse_value_rescale(value_rescale(x)), x, atol=1e-6)
    assert inverse_value_rescale(torch.tensor([1.003], dtype=torch.float64)).item() == pytest.approx(3.0, abs=1e-9)


def test_n_step_returns_without_episode_end():
    # T=4 (3 trained steps + 1), n=2, gamma=0.5. G_0 = r1 + .5 r2 + .25 V2; G_1 = r2 + .5 r3 + .25 V3;
    # G_2 is truncated to one step (SEED RL pads the end): r3 + .5 V3.
    r = torch.tensor([[0.0], [1.0], [2.0], [4.0]])
    d = torch.zeros(4, 1, dtype=torch.bool)
    v = torch.tensor([[10.0], [20.0], [40.0], [80.0]])
    g = n_step_returns(r, d, v, n=2, discount=0.5)
    assert g.squeeze(-1).tolist() == [1 + 1 + 10, 2 + 2 + 20, 4 + 40]


def test_n_step_returns_stops_at_episode_end():
    # done[2]: obs_2 starts a new episode, so the transition 1->2 was terminal.
    r = torch.tensor([[0.0], [1.0], [2.0], [4.0]])
    d = torch.tensor([[False], [False], [True], [False]])
    v = torch.tensor([[10.0], [20.0], [40.0], [80.0]])
    g = n_step_returns(r, d, v, n=2, discount=0.5)
    # G_0 = r1 + .5 r2 (final reward kept), no bootstrap; G_1 = r2 only; G_2 = r3 + .5 V3 (new episode).
    assert g.squeeze(-1).tolist() == [1 + 1, 2, 4 + 40]


def test_n_step_returns_pad_the_sequence_end_with_truncated_returns():
    # T=5 (4 trained steps + 1), n=3, gamma=0.5: every trained step gets a target.
    r = torch.tensor([[0.0], [1.0], [2.0], [4.0], [8.0]])
    v = torch.tensor([[10.0], [20.0], [40.0], [80.0], [160.0]])
    g = n_step_returns(r, torch.zeros(5, 1, dtype=torch.bool), v, n=3, discount=0.5)
    # G_0 = 1 + .5*2 + .25*4 + .125 V3; G_1 = 2 + .5*4 + .25*8 + .125 V4;
    # G_2 (2 steps left) = 4 + .5*8 + .25 V4; G_3 (1 step left) = 8 + .5 V4.
    assert g.squeeze(-1).tolist() == [3 + 10, 6 + 20, 8 + 40, 8 + 80]


def test_n_step_returns_done_inside_the_last_n_steps():
    # As above, but obs_4 starts a new episode: nothing after r4 is bootstrapped.
    r = torch.tensor([[0.0], [1.0], [2.0], [4.0], [8.0]])
    d = torch.tensor([[False], [False], [False], [False], [True]])
    v = torch.tensor([[10.0], [20.0], [40.0], [80.0], [160.0]])
    g = n_step_returns(r, d, v, n=3, discount=0.5)
    # G_0 = 1 + 1 + 1 + .125 V3 (no end in (0, 3]); G_1 = 2 + 2 + 2; G_2 = 4 + 4; G_3 = 8.
    assert g.squeeze(-1).tolist() == [3 + 10, 6, 8, 8]


def _seed_rl_bellman_target(rewards, done, q_next, gamma, n):
    """SEED RL's recursion (common/utils.py n_step_bellman_target), restated for the test.

    rewards/done/q_next [T, B] where index t holds r_{t+1}, done_{t+1}, V(obs_{t+1})."""
    target = torch.cat([torch.zeros_like(q_next[:1]), q_next] + [q_next[-1:] / gamma**k for k in range(1, n)])
    done = torch.cat([done] + [torch.zeros_like(done[:1])] * n).float()
    rewards = torch.cat([rewards] + [torch.zeros_like(rewards[:1])] * n)
    for _ in range(n):
        rewards, done = rewards[:-1], done[:-1]
        target = rewards + gamma * (1.0 - done) * target[1:]
    return target


def test_n_step_returns_equal_seed_rls_padded_bellman_targets():
    gen = torch.Generator().manual_seed(0)
    T, B, n, gamma = 12, 6, 5, 0.97
    r = torch.randn(T, B, generator=gen, dtype=torch.float64)
    d = torch.rand(T, B, generator=gen) < 0.15
    v = torch.randn(T, B, generator=gen, dtype=torch.float64)
    ours = n_step_returns(r, d, v, n, gamma)
    theirs = _seed_rl_bellman_target(r[1:], d[1:], v[1:], gamma, n)
    assert ours.shape == (T - 1, B)
    assert torch.allclose(ours, theirs, atol=1e-12)


def test_sequence_loss_sums_over_time_then_weights_the_batch_mean():
    td = torch.tensor([[1.0, 2.0], [3.0, 0.0]])  # [T=2, B=2]
    w = torch.tensor([1.0, 0.5])
    # per sequence 0.5 * (1 + 9) = 5 and 0.5 * 4 = 2; batch: (1 * 5 + 0.5 * 2) / 2 = 3
    assert sequence_loss(td, w).item() == pytest.approx(3.0)


def test_unroll_layout_tiles_the_stream():
    length, overlap = unroll_layout(40, 80, None)
    assert (length, overlap) == (121, 41)
    starts = sequence_starts(1000, length, overlap)
    trained = [range(s + 40, s + 40 + 80) for s in starts]  # steps that get a target
    assert all(a.stop == b.start for a, b in itertools.pairwise(trained))  # no gap, no double
    assert unroll_layout(4, 16, 8) == (21, 8)


def test_n_step_double_q_uses_online_argmax_and_target_value():
    T, n, gamma, eps = 3, 1, 0.9, 1e-3
    rewards = torch.tensor([[0.0], [1.0], [0.0]])
    dones = torch.zeros(T, 1, dtype=torch.bool)
    q_online = torch.tensor([[[0.0, 0.0]], [[5.0, 1.0]], [[0.0, 9.0]]])  # argmax at t=1: a0; t=2: a1
    q_target = torch.tensor([[[0.0, 0.0]], [[2.0, 7.0]], [[3.0, 4.0]]])
    got = n_step_double_q_targets(rewards, dones, q_online, q_target, n, gamma, eps)
    v1 = inverse_value_rescale(torch.tensor(2.0), eps)  # target[a0], not max 7
    v2 = inverse_value_rescale(torch.tensor(4.0), eps)  # target[a1]
    expected = value_rescale(torch.stack([1.0 + gamma * v1, 0.0 + gamma * v2]), eps)  # T - 1 = 2 targets
    assert torch.allclose(got.squeeze(-1), expected)


def test_n_step_rejects_short_sequence():
    with pytest.raises(ValueError, match="too short"):
        n_step_returns(torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.bool), torch.zeros(1, 1), 3, 0.9)


def test_priority_mix():
    td = torch.tensor([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0]])  # [T=3, B=2]
    got = mixed_priority(td, eta=0.9)
    assert torch.allclose(got, torch.tensor([0.9 * 3 + 0.1 * 2, 0.9 * 4 + 0.1 * 2]))


def test_importance_weights_normalised_by_batch_max():
    w = importance_weights(np.array([0.5, 0.25, 0.125]), size=4, beta=1.0)
    # (4 p)^-1 = [0.5, 1, 2] -> / 2
    assert np.allclose(w, [0.25, 0.5, 1.0])


def test_actor_epsilons_apex_schedule():
    eps = actor_epsilons(8, base=0.4, alpha=7.0)
    assert eps[0] == pytest.approx(0.4)
    assert eps[-1] == pytest.approx(0.4**8)
    assert eps[3] == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert np.all(np.diff(eps) < 0)
    assert actor_epsilons(1).tolist() == [0.4]


def test_sequence_starts_with_overlap():
    # length 6, overlap 2 -> stride 4: sequences [0,6), [4,10), [8,14)
    assert sequence_starts(14, 6, 2) == [0, 4, 8]
    assert sequence_starts(13, 6, 2) == [0, 4]
    assert sequence_starts(5, 6, 2) == []
    assert sequences_per_actor(14, 6, 2) == 3
    assert sequences_per_actor(120, 120, 40) == 1
    assert sequences_per_actor(200, 120, 40) == 2
    assert math.isclose(sequences_per_actor(0, 6, 2), 0)


def test_replay_ratio_holds_the_learner_back():
    from rlbench.algo.r2d2.rate_limit import learner_may_update

    # spi 4, batch 32: after 16 inserted sequences the learner may do 2 updates, not 3.
    assert learner_may_update(1, 32, inserted=16, size=16, min_replay=8, spi=4, actors_done=False)
    assert not learner_may_update(2, 32, inserted=16, size=16, min_replay=8, spi=4, actors_done=False)
    assert not learner_may_update(0, 32, inserted=7, size=7, min_replay=8, spi=4, actors_done=False)
    assert learner_may_update(99, 32, inserted=1, size=1, min_replay=8, spi=4, actors_done=True)
    assert learner_may_update(99, 32, inserted=16, size=16, min_replay=8, spi=0, actors_done=False)


def test_replay_ratio_holds_actors_back_beyond_slack():
    from rlbench.algo.r2d2.rate_limit import actors_may_insert, learner_may_update

    # 10 updates x 32 / spi 4 = 80 sequences used; + min_replay 8 + slack 4 = 92 allowed.
    assert actors_may_insert(10, 32, inserted=92, min_replay=8, spi=4, slack=4)
    assert not actors_may_insert(10, 32, inserted=93, min_replay=8, spi=4, slack=4)
    # never both waiting: where actors wait, the learner may update
    for inserted in range(0, 400, 7):
        for updates in range(40):
            if not actors_may_insert(updates, 32, inserted, 8, 4, slack=4):
                assert learner_may_update(updates, 32, inserted, min(inserted, 100), 8, 4, False)


def test_initial_priorities_bootstrap_from_the_played_action_as_seed_rl():
    """SEED computes initial priorities from the stored agent outputs, whose `action` inference
    already replaced by the epsilon-greedy one: the target bootstraps from Q(s', a' played)."""
    import numpy as np
    import torch

    from rlbench.algo.common.unrolls import Sequences
    from rlbench.algo.r2d2.acting import initial_priorities
    from rlbench.algo.r2d2.config import Schema
    from rlbench.algo.r2d2.math import inverse_value_rescale, value_rescale

    algo = Schema(burn_in=0, seq_len=2, n_step=1, discount=0.5)
    q = np.array([[[1.0, 2.0], [3.0, 0.5], [0.2, 4.0]]], np.float32)  # [1 sequence, 3 steps, 2 actions]
    action = np.array([[0, 1, 0]])  # step 1 plays 1 (argmax 0), step 2 plays 0 (argmax 1)
    reward = np.array([[0.0, 1.0, -1.0]], np.float32)
    seqs = Sequences(
        frames=np.zeros((1, 3, 1)),
        head=np.zeros((1, 0, 1)),
        action=action,
        prev_action=action,
        reward=reward,
        done=np.zeros((1, 3), bool),
        agent_out=q,
        state=np.zeros((1, 0), np.float32),
    )
    h, hinv = (
        (lambda x: float(value_rescale(torch.tensor(x)))),
        (lambda x: float(inverse_value_rescale(torch.tensor(x)))),
    )
    td = [abs(h(1.0 + 0.5 * hinv(0.5)) - 1.0), abs(h(-1.0 + 0.5 * hinv(0.2)) - 0.5)]  # Q(s1, 1), Q(s2, 0)
    expected = 0.9 * max(td) + 0.1 * sum(td) / 2
    assert initial_priorities(seqs, algo)[0] == pytest.approx(expected, rel=1e-5)
