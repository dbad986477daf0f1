"""The command line: everything that starts things (the `fleet` command, the demo, serve) sits here, above flows/."""

import signal
import sys


def _stopped_while_starting(signum: int, frame: object) -> None:
    print("stopped before serving anything", flush=True)
    raise SystemExit(0)


if sys.argv[1:2] == ["serve"]:
    # `fleet serve` stops on SIGINT from its first moment, quietly while its imports run (a second; then its own
    # handling takes over): started in the background from a script, SIGINT begins ignored, and its first seconds
    # ignored it
    signal.signal(signal.SIGINT, _stopped_while_starting)
