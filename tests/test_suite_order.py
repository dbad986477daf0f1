"""The order the suite hands its side-by-side workers (tests/conftest.py): each long test leads a share, and every
test is run once, whatever the mix of long and short tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import long_first


@dataclass(eq=False)
class Item:
    """What the ordering reads of a pytest item: its file and its `long(seconds)` marker."""

    name: str
    path: Path
    seconds: float | None = None
    marks: dict[str, pytest.Mark] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.seconds is not None:
            self.marks["long"] = pytest.Mark("long", (self.seconds,), {})

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marks.get(name)


@pytest.mark.parametrize(("long", "short", "files"), [(1, 9, 1), (4, 4, 4), (5, 0, 5), (6, 1, 6), (6, 0, 1), (6, 2, 2)])
def test_each_long_test_leads_a_share_and_every_test_runs_once(long: int, short: int, files: int) -> None:
    """A file's long tests stay together (they share its servers): six in one file and nothing else was the run
    of one module's long tests side by side, which stopped collection (StopIteration) before."""
    items = [Item(f"long{i}", Path(f"test_l{i % files}.py"), seconds=10 + i) for i in range(long)]
    items += [Item(f"short{i}", Path("test_s.py")) for i in range(short)]
    ordered = long_first(items, workers=4)  # before: StopIteration when too few short tests filled the shares
    assert sorted(item.name for item in ordered) == sorted(item.name for item in items)
    heaviest = max((item for item in items if item.seconds), key=lambda item: item.seconds)
    assert ordered[0].path == heaviest.path, "the heaviest file's long tests lead the first share"
