"""Where the shared reference lives: `$FLEET_REFERENCE_DIR`, else `shared/reference` beside the repository
(as on every developer machine and in CI). Tests that replay it fail loudly when it is missing."""

import os
from pathlib import Path

REFERENCE = Path(
    os.environ.get("FLEET_REFERENCE_DIR") or Path(__file__).resolve().parents[2] / "shared" / "reference"
)
EXCHANGES = REFERENCE / "real-exchanges"
ABILITIES = REFERENCE / "abilities.json"


def require_reference() -> None:
    assert EXCHANGES.is_dir(), f"the reference exchanges are not at {EXCHANGES}: set FLEET_REFERENCE_DIR"

REPLAY_COUNTS: list[str] = []  # printed at the end of every run by tests/conftest.py


def announce(line: str) -> None:
    """Record a replay count so the run's summary shows it even when output is captured."""
    REPLAY_COUNTS.append(line)
