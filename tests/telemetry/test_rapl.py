"""RaplSource against fake powercap trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlbench.telemetry.rapl import RaplSample, RaplSource, find_zones

from .fakes import FakePowercap

MAX = 262_143_328_850


@pytest.fixture
def sysfs(tmp_path: Path) -> FakePowercap:
    return FakePowercap(tmp_path / "powercap")


def source(sysfs: FakePowercap) -> RaplSource:
    return RaplSource(sysfs.root, reader=sysfs.read)


def test_discovers_packages_and_dram(sysfs: FakePowercap) -> None:
    sysfs.add_package(1, dram=(0, MAX))
    sysfs.add_package(0, dram=(0, MAX))
    found = [(kind, name) for kind, name, _ in find_zones(sysfs.root, sysfs.read)]
    assert found == [("package", "package-0"), ("dram", "package-0/dram"),
                     ("package", "package-1"), ("dram", "package-1/dram")]  # fmt: skip
    src = source(sysfs)
    assert src.available and src.dram_available and src.reason is None
    assert all(z.max_range == MAX for z in src.zones)


def test_cumulative_energy_summed_over_packages(sysfs: FakePowercap) -> None:
    p0 = sysfs.add_package(0, energy_uj=1_000_000, dram=(500, MAX))
    p1 = sysfs.add_package(1, energy_uj=7_000_000)
    src = source(sysfs)
    assert src.sample() == RaplSample(0.0, 0.0)
    sysfs.set_energy(p0, 3_000_000)  # +2 J
    sysfs.set_energy(p1, 10_000_000)  # +3 J
    sysfs.set_energy(sysfs.dram(0), 250_500)  # +0.25 J
    assert src.sample() == RaplSample(5.0, 0.25)


def test_wraparound_adds_the_distance_through_the_top(sysfs: FakePowercap) -> None:
    pkg = sysfs.add_package(0, energy_uj=MAX - 10)
    src = source(sysfs)
    src.sample()
    sysfs.set_energy(pkg, 5)
    assert src.sample().pkg_energy_j == pytest.approx(15e-6)  # +15 uJ, not negative
    assert src.zones[0].energy.total == 15 and src.dropped == 0


def test_unreadable_max_range_drops_the_wrapped_sample(sysfs: FakePowercap) -> None:
    pkg = sysfs.add_package(0, energy_uj=1_000, max_range_uj=None)  # file missing
    src = source(sysfs)
    assert src.zones[0].max_range is None and src.available
    src.sample()
    sysfs.set_energy(pkg, 1_500)
    assert src.sample().pkg_energy_j == pytest.approx(500e-6)  # no wrap: range not needed
    sysfs.set_energy(pkg, 20)  # wrapped, range unknown
    assert src.sample().pkg_energy_j == pytest.approx(500e-6)  # delta dropped, not negative
    sysfs.set_energy(pkg, 120)
    assert src.sample().pkg_energy_j == pytest.approx(600e-6)
    assert src.dropped == 1


def test_max_range_read_again_when_a_wrap_needs_it(sysfs: FakePowercap) -> None:
    pkg = sysfs.add_package(0, energy_uj=90, max_range_uj=100)
    sysfs.break_file(pkg / "max_energy_range_uj")
    src = source(sysfs)
    src.sample()
    sysfs.broken.clear()  # readable again by the time the counter wraps
    sysfs.set_energy(pkg, 5)
    assert src.sample().pkg_energy_j == pytest.approx(15e-6)


def test_permission_denied_gives_none_and_the_reason(sysfs: FakePowercap) -> None:
    pkg = sysfs.add_package(0, dram=(0, MAX))
    sysfs.deny(pkg / "energy_uj")
    src = source(sysfs)
    assert not src.available
    assert src.reason == f"permission denied reading {pkg / 'energy_uj'} (root-only since Linux 5.10)"
    assert src.sample().pkg_energy_j is None
    assert src.sample().dram_energy_j == 0.0  # DRAM stays readable on its own


def test_no_powercap_directory(tmp_path: Path) -> None:
    src = RaplSource(tmp_path / "absent")
    assert not src.available and not src.dram_available
    assert src.reason.startswith(f"no powercap directory at {tmp_path / 'absent'}")
    assert src.sample() == RaplSample(None, None)


def test_no_package_zone_and_no_dram(sysfs: FakePowercap) -> None:
    assert source(sysfs).reason == f"no RAPL package zone under {sysfs.root}"
    sysfs.add_package(0)
    src = source(sysfs)
    assert src.available and src.dram_reason == f"no RAPL dram zone under {sysfs.root}"
    assert src.sample() == RaplSample(0.0, None)


def test_transient_read_failure_is_none_then_catches_up(sysfs: FakePowercap) -> None:
    pkg = sysfs.add_package(0, energy_uj=0)
    src = source(sysfs)
    src.sample()
    sysfs.set_energy(pkg, 1_000_000)
    sysfs.break_file(pkg / "energy_uj")
    assert src.sample().pkg_energy_j is None
    assert "Input/output error" in src.last_error
    sysfs.broken.clear()
    sysfs.set_energy(pkg, 2_000_000)
    assert src.sample().pkg_energy_j == 2.0  # the counter kept counting through the gap


def test_real_powercap_readable_starts_at_zero() -> None:
    src = RaplSource()
    if not src.available:
        pytest.skip(f"RAPL package energy is not readable on this host: {src.reason}")
    assert src.sample().pkg_energy_j == 0.0  # cumulative since the source's first reading


def test_real_powercap_unreadable_gives_none_and_the_reason() -> None:
    src = RaplSource()
    if src.available:
        pytest.skip("RAPL package energy is readable on this host")
    assert src.sample().pkg_energy_j is None and src.reason
