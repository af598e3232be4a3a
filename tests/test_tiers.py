"""The fast tier's parallel run is added to exactly the whole fast tier (tests/tiers.py)."""

import pytest

from tests.tiers import PARALLEL, fast_tier_args


@pytest.mark.parametrize("args", [["-q", "-m", "not e2e"], ["-m", "not e2e"], ["-q", "-mnot e2e", "--durations=20"]])
def test_the_whole_fast_tier_gets_a_worker_per_core(args):
    assert fast_tier_args(args, cores=2, have_xdist=True) == [*args, *PARALLEL]


@pytest.mark.parametrize("args", [
    ["-q"],  # the whole suite: one process (the e2e tier's timing)
    ["-q", "-m", "e2e"],
    ["-q", "-m", "not e2e", "tests/test_config.py"],  # a path: as asked
    ["-q", "-m", "not e2e", "tests/test_config.py::test_every_group_composes_and_validates"],
    ["-q", "-m", "not e2e", "-n", "0"],
    ["-q", "-m", "not e2e", "-n0"],
    ["-q", "-m", "not e2e", "-p", "no:xdist"],
    ["-q", "-m", "not e2e", "--dist=load"],
])
def test_any_other_selection_runs_as_asked(args):
    assert fast_tier_args(args, cores=2, have_xdist=True) == args


def test_one_core_or_no_xdist_runs_in_one_process():
    args = ["-q", "-m", "not e2e"]
    assert fast_tier_args(args, cores=1, have_xdist=True) == args
    assert fast_tier_args(args, cores=8, have_xdist=False) == args
