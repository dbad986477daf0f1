"""The real dashboard's captured exchanges and ability catalogue, kept beside this module (see README.md here);
`$FLEET_REFERENCE_DIR` reads another copy instead. Tests that replay them fail loudly when they are missing."""

import os
from pathlib import Path

REFERENCE = Path(os.environ.get("FLEET_REFERENCE_DIR") or Path(__file__).resolve().parent)
EXCHANGES = REFERENCE / "real-exchanges"
ABILITIES = REFERENCE / "abilities.json"


def require_reference() -> None:
    assert EXCHANGES.is_dir(), f"the reference exchanges are not at {EXCHANGES}: set FLEET_REFERENCE_DIR"

REPLAY_COUNTS: list[str] = []  # printed at the end of every run by tests/conftest.py


def announce(line: str) -> None:
    """Record a replay count so the run's summary shows it even when output is captured."""
    REPLAY_COUNTS.append(line)
