"""A job's one typed config is frozen from its validation to its record (rlbench/config/frozen.py)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from rlbench.config.frozen import freeze, is_frozen
from rlbench.prepare.compose import compose_job
from rlbench.prepare.job import Job, job_of
from rlbench.tracking.record import flatten


@pytest.fixture(scope="module")
def config():
    return compose_job(["env=cartpole", "search=ratio", "+tracking.tags.study=s"])


CHANGES = {
    "a top-level value": lambda c: setattr(c, "actors", 3),
    "a nested value": lambda c: setattr(c.env, "id", "Acrobot-v1"),
    "a list": lambda c: c.search.actors.append(7),
    "a dict": lambda c: c.tracking.tags.update(x="y"),
    "a dict item": lambda c: c.tracking.tags.__setitem__("x", "y"),
    "a deleted value": lambda c: delattr(c, "seed"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_jobs_config_refuses_every_change(config, change):
    job = job_of(config, ["env=cartpole"])
    with pytest.raises(dataclasses.FrozenInstanceError, match="frozen"):
        CHANGES[change](job.config)


def test_freezing_copies_and_keeps_what_the_record_reads(config):
    before = flatten(dataclasses.asdict(config))
    job = Job(config)  # a Job freezes what it is given
    assert is_frozen(job.config) and not is_frozen(config)  # the caller's config stays its own
    assert job.config == config and flatten(dataclasses.asdict(job.config)) == before  # the params, as printed
    assert isinstance(job.config, type(config)) and freeze(job.config) is job.config
    for again in (pickle.loads(pickle.dumps(job.config)), copy.deepcopy(job.config)):  # to another process
        assert is_frozen(again) and is_frozen(again.tracking) and again == config
