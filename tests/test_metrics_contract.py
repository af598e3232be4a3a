"""The metric contract (rlbench/core/metrics.py) against docs/metrics.md and against what jobs log."""

import re

import pytest

from rlbench.config.rules import ConfigError
from rlbench.core.metrics import FAMILIES, METRICS, OP_FRACS, OPS, PER_PROCESS, SYSTEM, declared
from rlbench.prepare.validate import validate
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "metrics.md").read_text()


def _doc_metric_names() -> set[str]:
    """Backticked names in the first column of the metric tables (`a`, `b` rows count each)."""
    names = set()
    for line in DOC.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([a-z0-9_/<>]+)`", line.split("|")[1]))
        elif line.startswith("| step metrics"):
            names |= set(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    return names


def _built_in_algorithm_metrics() -> set[str]:
    from rlbench.core.algorithms import BUILT_IN, config_module

    return {m.name for algo in BUILT_IN for m in config_module(algo).METRICS}


def test_every_declared_metric_is_documented_and_every_documented_one_declared():
    documented = _doc_metric_names() - {"op_frac/<role>/<op>"}
    declared_names = set(METRICS) | set(FAMILIES) | set(PER_PROCESS) | {SYSTEM.name} | _built_in_algorithm_metrics()
    assert documented - declared_names == set(), (
        "in docs/metrics.md, declared neither in rlbench/core/metrics.py nor by an algorithm"
    )
    assert declared_names - documented == set(), "declared, not in docs/metrics.md"


def test_an_algorithms_own_metrics_are_its_and_may_not_shadow_the_shared_ones():
    from rlbench.core.metrics import algorithm_metrics, declare_algorithm, final_metric_names

    assert _built_in_algorithm_metrics() >= {"replay_size", "vtrace/entropy"}
    assert "replay_size" in algorithm_metrics("r2d2") and "replay_size" not in algorithm_metrics("vtrace")
    assert declared("vtrace/entropy", "vtrace") and not declared("vtrace/entropy", "r2d2")
    assert "vtrace/entropy" in final_metric_names("vtrace") and "vtrace/entropy" not in final_metric_names("r2d2")
    with pytest.raises(
        ValueError, match="algorithm 'shadow' declares fps, already in rlbench/core/metrics.py's contract"
    ):
        declare_algorithm("shadow", [METRICS["fps"]])
    assert "shadow" not in algorithm_metrics() and algorithm_metrics("shadow") == {}


def test_every_operation_is_documented_under_its_role():
    text = DOC.replace("\n", " ")
    text = text[text.index("Roles and operations:") : text.index("Every role also has")]
    starts = sorted((text.index(f"`{role}` ("), role) for role in OPS)
    for (start, role), (end, _) in zip(starts, [*starts[1:], (len(text), None)], strict=True):
        for op in OPS[role]:
            assert f"`{op}`" in text[start:end], f"{role}/{op} is not in docs/metrics.md's list of {role}' operations"
    assert "Every role also has `other`" in DOC.replace("\n", " ")


def test_mlflows_system_metrics_are_a_declared_family():
    """Every job logs them by default (tracking.system_metrics=true); names vary per host and GPU."""
    assert declared("system/cpu_utilization_percentage") and declared("system/gpu_3_power_usage_watts")
    assert not declared("system/") and not declared("systemcpu")


def test_each_actor_processs_metrics_are_a_declared_family():
    """One role per actor process (actor_proc<i>): any index, the actor_procs operations only."""
    assert declared("op_frac/actor_proc0/env_step") and declared("op_frac/actor_proc17/wait_actions")
    assert declared("op_frac/actor_proc3/other") and declared("actor_proc12/cpu_s")
    assert declared("actor_proc2/bytes_sent_per_step") and declared("actor_proc2/bytes_received_per_step")
    assert declared("op_frac/actor_procs/wait_actions") and declared("actor_rejoins")  # the summed role's
    for name in (
        "op_frac/actor_proc/env_step",
        "op_frac/actor_proc01/env_step",
        "op_frac/actor_proc1/inference",
        "actor_proc1/cpu",
        "actor_procx/cpu_s",
        "op_frac/actor_proc<i>/<op>",
    ):
        assert not declared(name), name


def test_op_fracs_cover_every_role_op_and_other():
    assert "op_frac/learner/stack_rebuild" in OP_FRACS and "op_frac/actors/other" in OP_FRACS
    assert declared("fps") and not declared("fpss") and not declared("op_frac/learner/nap")


def test_unknown_search_objective_is_refused_naming_it(compose_cfg):
    with pytest.raises(
        ConfigError,
        match=r"search.objectives=\['fps', 'fpss'\]: 'fpss' is no final metric; "
        r"did you mean 'fps'",
    ):
        validate(compose_cfg(["search=ratio", "search.objectives=[fps,fpss]", "search.directions=[maximize,maximize]"]))
    with pytest.raises(ConfigError, match="'vtrace/entropy' is no final metric"):  # V-trace's, not R2D2's
        validate(compose_cfg(["search=ratio", "search.objectives=[vtrace/entropy]", "search.directions=[maximize]"]))
    with pytest.raises(ConfigError, match="'episode_return' is no final metric"):  # per-episode, not a job result
        validate(compose_cfg(["search=ratio", "search.objectives=[episode_return]", "search.directions=[maximize]"]))


def test_each_algorithms_operations_are_in_the_contract():
    from rlbench.core.algorithms import ALGORITHMS, config_module

    for algo in ALGORITHMS:
        for role, ops in config_module(algo).OPS.items():
            assert set(ops) <= set(OPS[role]), f"{algo}'s {role} times an operation the contract does not declare"


def test_the_sweep_summary_report_and_search_read_only_declared_metrics():
    """Every metric name the sweep summary, the report (figures, verdict, HTML) and the search
    read is in the contract: a renamed metric cannot silently vanish from them."""
    from rlbench.sweeps.sweep import SUMMARY_COLUMNS
    from rlbench.tracking.parent_note import SUMMARY_METRICS

    # the last alternative: (metric, label, transform) panels
    read = (
        r'(?:value|why_missing|metrics\.get|\bm\.get)\("([^"]+)"|\bm\["([^"]+)"\]'
        r'|\("([a-z_]+)", "[^"]*", \w+\)'
    )
    names = set()
    for path in [
        *(ROOT / "rlbench" / "report").glob("*.py"),
        *(ROOT / "rlbench" / "sweeps").glob("*.py"),
        *(ROOT / "rlbench" / "search").glob("*.py"),
    ]:
        names |= {n for groups in re.findall(read, path.read_text()) for n in groups if n}
    names |= set(SUMMARY_COLUMNS) - {"job", "name", "config", "repeat", "overrides", "status", "run_id", "verdict"}
    names |= set(SUMMARY_METRICS)  # the parent run's jobs/<m> and best/<m>
    assert len(names) >= 10, sorted(names)  # the patterns still find what these modules read
    assert sorted(n for n in names if not declared(n)) == []
