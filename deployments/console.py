"""The console of the flow runs `fleet serve` runs: a failed night is one line there, not a traceback.

`fleet serve` streams each flow run's console into its own output, where an operator reads what happened night
after night; Prefect prints a failed run's whole traceback there (11 to 16 lines a night). The runs' processes use
this handler for Prefect's `console` handler (`PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS`, set by `fleet serve` for
the processes it starts): a record that carries an exception is printed as one line, and the traceback still goes,
whole, to the flow run's own logs in Prefect (its `api` handler is untouched).
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from prefect.logging.handlers import PrefectConsoleHandler

HANDLER = f"{__name__}.OneLineFailures"


def failure_line(record: logging.LogRecord, error: BaseException) -> str:
    """`run NAME (ID) failed: Kind: first line; report: DIR` for the flow run's own failure, else the record's own
    first line (a task's failure, say)."""
    run_id = getattr(record, "flow_run_id", None)
    if run_id is None or getattr(record, "task_run_id", None) is not None \
            or not str(record.msg).startswith("Encountered exception"):
        return (record.getMessage().strip().splitlines() or [type(error).__name__])[0]
    lines = str(error).strip().splitlines()
    said = lines[0] + (" …" if len(lines) > 1 else "") if lines else "(no message)"
    summary = getattr(error, "summary_path", None)
    where = (f"report: {Path(summary).parent}" if summary else
             "no report was written; the traceback is in the flow run's logs")
    return (f"run {getattr(record, 'flow_run_name', '?')} ({run_id}) failed: {type(error).__name__}: {said}; "
            f"{where}")


class OneLineFailures(PrefectConsoleHandler):
    """Prefect's console handler, printing a record that carries an exception as one line without its traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            record = copy.copy(record)
            record.msg, record.args = failure_line(record, error), ()
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        super().emit(record)
