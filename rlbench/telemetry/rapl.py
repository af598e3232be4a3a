"""CPU package and DRAM energy from RAPL counters under /sys/class/powercap.

`RaplSource` reads Linux's intel_rapl powercap zones (AMD Zen too); counter wraps go through
`counter_delta`, a wrap of unknown range dropped and counted, never negative. The root and the
file reader are injectable for tests. The layout read: docs/metrics.md, "Telemetry, inside".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rlbench.telemetry.energy import CounterAccumulator

POWERCAP_ROOT = Path("/sys/class/powercap")
_TOP = re.compile(r"^intel-rapl:(\d+)$")
_SUB = re.compile(r"^intel-rapl:\d+:(\d+)$")

Reader = Callable[[Path], str]


def read_sysfs(path: Path) -> str:
    """Read a sysfs attribute."""
    return path.read_text()


def read_failure(path: Path, err: OSError) -> str:
    """The reason string for an unreadable RAPL file."""
    if isinstance(err, PermissionError):
        return f"permission denied reading {path} (root-only since Linux 5.10)"
    return f"cannot read {path}: {type(err).__name__}: {err}"


@dataclass
class RaplZone:
    """One counter: a package or a DRAM domain."""

    kind: str  # "package" or "dram"
    name: str
    path: Path
    max_range: int | None = None
    energy: CounterAccumulator = field(default_factory=CounterAccumulator)


@dataclass(frozen=True)
class RaplSample:
    """Energy (J) summed over zones, cumulative since the source's first reading; None if unread."""

    pkg_energy_j: float | None = None
    dram_energy_j: float | None = None


def _numbered(root: Path, pattern: re.Pattern[str]) -> list[Path]:
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := pattern.match(p.name))]
    return [p for _, p in sorted(found)]


def find_zones(root: Path, reader: Reader = read_sysfs) -> Iterator[tuple[str, str, Path]]:
    """(kind, name, dir) for every package zone and DRAM domain under `root`."""
    for top in _numbered(root, _TOP):
        try:
            name = reader(top / "name").strip()
        except OSError:
            continue
        if name.startswith("package"):
            yield "package", name, top
            for sub in _numbered(top, _SUB):
                try:
                    if reader(sub / "name").strip() == "dram":
                        yield "dram", f"{name}/dram", sub
                except OSError:
                    continue
        elif name == "dram":
            yield "dram", name, top


class RaplSource:
    """Reads RAPL package and DRAM energy; unreadable domains are None with a reason."""

    def __init__(self, root: str | Path = POWERCAP_ROOT, reader: Reader = read_sysfs) -> None:
        self.root = Path(root)
        self._read = reader
        self.zones: list[RaplZone] = []
        self.reason: str | None = None  # why package energy is unavailable
        self.dram_reason: str | None = None  # why DRAM energy is unavailable
        self.last_error: str | None = None
        self._discover()

    @property
    def available(self) -> bool:
        """Package energy can be read."""
        return self.reason is None

    @property
    def dram_available(self) -> bool:
        return self.dram_reason is None

    @property
    def dropped(self) -> int:
        """Deltas dropped because a wrap could not be resolved."""
        return sum(z.energy.dropped for z in self.zones)

    # ---- discovery ------------------------------------------------------------------
    def _discover(self) -> None:
        if not self.root.is_dir():
            self.reason = f"no powercap directory at {self.root} (no RAPL: not Linux, a VM, or no intel_rapl driver)"
            self.dram_reason = self.reason
            return
        found = list(find_zones(self.root, self._read))
        self.reason = self._probe_kind([f for f in found if f[0] == "package"], "package")
        self.dram_reason = self._probe_kind([f for f in found if f[0] == "dram"], "dram")

    def _probe_kind(self, found: list[tuple[str, str, Path]], kind: str) -> str | None:
        """Add the zones of one kind if all are readable; else return why not."""
        if not found:
            return f"no RAPL {kind} zone under {self.root}"
        zones = [RaplZone(k, name, path) for k, name, path in found]
        for zone in zones:
            try:
                int(self._read(zone.path / "energy_uj"))
            except OSError as e:
                return read_failure(zone.path / "energy_uj", e)
            zone.max_range = self._max_range(zone)
        self.zones.extend(zones)
        return None

    def _max_range(self, zone: RaplZone) -> int | None:
        try:
            return int(self._read(zone.path / "max_energy_range_uj"))
        except (OSError, ValueError) as e:
            self.last_error = f"{zone.name}: max_energy_range_uj unreadable ({e})"
            return None

    # ---- sampling -------------------------------------------------------------------
    def sample(self) -> RaplSample:
        """Cumulative package and DRAM energy; a kind with any failed read is None this sample."""
        failed = {z.kind for z in self.zones if not self._update(z)}
        return RaplSample(self._total("package", failed), self._total("dram", failed))

    def _update(self, zone: RaplZone) -> bool:
        try:
            raw = int(self._read(zone.path / "energy_uj"))
        except (OSError, ValueError) as e:
            self.last_error = f"{zone.name}: {e}"
            return False
        prev = zone.energy.prev
        if prev is not None and raw < prev and zone.max_range is None:
            zone.max_range = self._max_range(zone)  # needed now; retry the read
        zone.energy.update(raw, zone.max_range)
        return True

    def _total(self, kind: str, failed: set[str]) -> float | None:
        zones = [z for z in self.zones if z.kind == kind]
        if not zones or kind in failed:
            return None
        return sum(z.energy.total for z in zones) / 1e6  # uJ -> J
