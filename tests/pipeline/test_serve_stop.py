"""The safe point between calls, without Prefect: once `fleet serve` asks its runs to stop (the file named in
`FLEET_STOP_FILE`), no new call is sent, the calls in flight are answered first, and the run ends by
`StoppedByServe`; a call made while reading another's answer never waits for itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orchestration import serve_stop
from orchestration.serve_stop import STOP_FILE, StoppedByServe, call_in_flight, stop_requested


def test_no_call_is_sent_after_the_stop_and_the_calls_in_flight_are_answered_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = tmp_path / "stop"
    monkeypatch.setenv(STOP_FILE, str(stop))
    monkeypatch.setattr(serve_stop._InFlight, "sent", 0)  # a process's count (one flow run a process under serve)
    sent: list[int] = []
    answered: list[int] = []
    ended: list[tuple[list[int], list[int]]] = []

    async def call(number: int) -> None:
        try:
            async with call_in_flight():
                sent.append(number)
                if number == 1:
                    stop.touch()  # `fleet serve` is stopped while calls 0 and 1 are in flight
                await asyncio.sleep(0.3 if number == 0 else 0.1)
                if number == 1:  # reading the answer makes a call of its own: part of this one
                    async with call_in_flight():
                        pass
                answered.append(number)
        except StoppedByServe:
            ended.append((list(sent), list(answered)))
            raise

    async def night() -> None:
        first = [asyncio.create_task(call(number)) for number in (0, 1)]
        await asyncio.sleep(0.05)
        await asyncio.gather(*first, call(2), call(3))

    assert not stop_requested()
    with pytest.raises(StoppedByServe) as stopped:
        asyncio.run(night())
    assert stop_requested()
    assert sent == [0, 1] and sorted(answered) == [0, 1]
    assert ended and all(seen == ([0, 1], [1, 0]) for seen in ended), ended  # raised once both were answered
    assert "cancelled by the stop of `fleet serve` at a safe point between calls, after 2 calls" in str(
        stopped.value)


def test_without_fleet_serve_no_stop_is_ever_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stop").touch()
    monkeypatch.delenv(STOP_FILE, raising=False)
    assert not stop_requested()
