"""Whether the process of a run is still alive: the night lock's holder and the journal's unfinished runs.

A process is known by its host, its pid and its start time: a pid the system hands out again after a reboot or a
busy day is another process, and must not keep a dead run's lock or hide its work from the next run.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class RunProcess:
    host: str
    pid: int
    started: float  # the process's start time (seconds since the epoch, as the system keeps it); 0 when not known

    @classmethod
    def this(cls) -> RunProcess:
        return cls(socket.gethostname(), os.getpid(), process_started(os.getpid()))

    @property
    def here(self) -> bool:
        """On this machine: its liveness can be asked; elsewhere only a lease tells."""
        return self.host == socket.gethostname()

    def alive(self) -> bool:
        """This machine's process with this pid, started when it was (within a second: the system rounds), and not
        a zombie (killed, its parent not yet told)."""
        if not self.here:
            raise ValueError(f"process {self.pid} runs on {self.host}, not here: only its lease can tell")
        try:
            process = psutil.Process(self.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            started = process.create_time()
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:  # another user's process: it cannot be asked, so it is taken as alive
            return True
        return not self.started or abs(started - self.started) < 1.0


def process_started(pid: int) -> float:
    """When the process `pid` of this machine started; 0 when it cannot be asked."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0
