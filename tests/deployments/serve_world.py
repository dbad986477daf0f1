"""The world `fleet serve` is tried in: one real `prefect server start`, an emulated dashboard of 3 sites whose nights
last some seconds, and a chat-shaped webhook receiver behind the `FLEET_NOTIFY_BLOCK` block."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.serve_stops import (
    NOTIFY,
    SERVE_SETTINGS,
    SERVER_SETTINGS,
    ChatReceiver,
    chat_receiver,
    nightly_runs,
    runs_in,
    save_chat_block,
    serving_started,
    start_serving,
    wait_until,
)
from cli.demo import dashboard_environment
from cli.local_prefect import LocalPrefectServer
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer


@dataclass
class World:
    server: LocalPrefectServer
    emulator: EmulatorServer
    chat: ChatReceiver
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)  # killed at the end if a test failed

    def serve(self, directory: Path, settings: dict[str, str] = SERVE_SETTINGS) -> tuple[subprocess.Popen[bytes], Path]:
        process, output = start_serving(self.server, dashboard_environment(self.emulator.credentials), directory,
                                        FLEET_NOTIFY_BLOCK=NOTIFY, **settings)
        self.started.append(process)
        assert wait_until(lambda: serving_started(output) or process.poll() is not None, 180, 0.05), output.read_text()
        assert process.poll() is None, output.read_text()
        return process, output

    def run(self, name: str) -> dict[str, Any]:
        return nightly_runs(self.server, name=name)[0]

    def crashed_said(self, since: Since | None = None) -> list[str]:
        """What the chat was told of a crash (since a test began: the module's tests share the world, in any order)."""
        return [text for text in self.chat.texts()[since.said if since else 0:] if "rash" in text]

    def runs_in(self, since: Since, *states: str) -> list[dict[str, Any]]:
        """The runs created since a test began now in one of `states`."""
        return [run for run in runs_in(self.server, *states)
                if datetime.fromisoformat(run["created"]).timestamp() >= since.moment]

    def since(self) -> Since:
        return Since(time.time(), len(self.chat.received))


@dataclass(frozen=True)
class Since:
    """A moment of a test: the time and how much the chat had been told."""

    moment: float
    said: int


@contextmanager
def served_world(directory: Path) -> Iterator[World]:
    """The world for a test module; every `fleet serve` it started and a failed test left running, killed."""
    with chat_receiver() as chat, EmulatorServer(EmulatorConfig(sites=3, time_scale=0.02)) as emulator, \
            LocalPrefectServer(directory / "prefect", SERVER_SETTINGS) as server:
        save_chat_block(server, chat)
        world = World(server, emulator, chat)
        try:
            yield world
        finally:
            for process in world.started:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
