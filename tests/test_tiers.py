"""The whole suite and the fast tier run in parallel, and only they (tests/tiers.py); the files
go to the workers heaviest first."""

from types import SimpleNamespace

import pytest

from tests.tiers import PARALLEL, by_weight, lacks_gpu_marker, parallel_args


@pytest.mark.parametrize(
    "args",
    [
        ["-q"],
        [],
        ["-q", "-m", "not e2e"],
        ["-m", "not e2e"],
        ["-q", "-mnot e2e", "--durations=20"],
        ["-q", "--durations", "0"],
    ],
)
def test_the_whole_suite_and_the_whole_fast_tier_get_a_worker_per_core(args):
    assert parallel_args(args, cores=2, have_xdist=True) == [*args, *PARALLEL]


@pytest.mark.parametrize(
    "args",
    [
        ["-q", "-m", "e2e"],
        ["-q", "-m", "gpu"],
        ["-q", "tests/test_config.py"],  # a path: as asked
        ["-q", "-m", "not e2e", "tests/test_config.py"],
        ["-q", "-m", "not e2e", "tests/test_config.py::test_every_group_composes_and_validates"],
        ["-q", "-k", "sweep"],
        ["-q", "-m", "not e2e", "-n", "0"],
        ["-q", "-n0"],
        ["-q", "-m", "not e2e", "-p", "no:xdist"],
        ["-q", "--dist=load"],
    ],
)
def test_any_other_selection_runs_as_asked(args):
    assert parallel_args(args, cores=2, have_xdist=True) == args


def test_one_core_or_no_xdist_runs_in_one_process():
    for args in (["-q"], ["-q", "-m", "not e2e"]):
        assert parallel_args(args, cores=1, have_xdist=True) == args
        assert parallel_args(args, cores=8, have_xdist=False) == args


def _item(nodeid: str, *marks: str):
    return SimpleNamespace(nodeid=nodeid, iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


def test_files_go_out_heaviest_first_and_keep_their_tests_in_order():
    items = [
        _item("tests/a.py::one"),
        _item("tests/a.py::two"),
        _item("tests/a.py::three"),
        _item("tests/b.py::job", "e2e"),
        _item("tests/c.py::learns", "e2e", "slow"),
        _item("tests/c.py::unit"),
        _item("tests/d.py::one"),
        _item("tests/e.py::sweep", "e2e"),
        _item("tests/e.py::unit"),
    ]
    order = [i.nodeid for i in by_weight(items)]
    assert order == [
        "tests/c.py::learns",
        "tests/c.py::unit",  # trains for real
        "tests/e.py::sweep",
        "tests/e.py::unit",
        "tests/b.py::job",  # one e2e test each: more tests first
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/a.py::three",
        "tests/d.py::one",
    ]


def _marked(*marks):
    return SimpleNamespace(iter_markers=lambda: list(marks))


def test_a_test_skipped_without_cuda_needs_the_gpu_marker():
    cuda = SimpleNamespace(name="skipif", kwargs={"reason": "needs a CUDA GPU"})
    assert lacks_gpu_marker(_marked(cuda))
    assert not lacks_gpu_marker(_marked(SimpleNamespace(name="gpu", kwargs={}), cuda))
    assert not lacks_gpu_marker(_marked(SimpleNamespace(name="skipif", kwargs={"reason": "needs 2 CPU threads"})))


def test_the_green_context_tests_are_selected_by_the_gpu_marker():
    """`pytest -m gpu` on a GPU host runs the autograd-thread fix's tests (tests/test_gpu_green_context.py)."""
    import tests.test_gpu_green_context as green

    marks = green.pytestmark if isinstance(green.pytestmark, list) else [green.pytestmark]
    assert "gpu" in {m.name for m in marks}
