"""JSON from a request, read as WordPress reads it (PHP's `json_decode`, nesting depth 512), and the rule for
taking large inputs off the event loop so that one huge request never holds up the others."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

MAX_DEPTH = 512  # json_decode's default depth
LARGE_BYTES = 64 * 1024  # above this, decoding and validating run in a thread

T = TypeVar("T")


class JsonInputError(ValueError):
    """JSON that `json_decode` refuses: `code` and `message` are PHP's `json_last_error()` and its message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels (iteratively: no recursion on hostile input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def decode_json(raw: bytes | str) -> Any:
    """The JSON value, or `JsonInputError` for a syntax error (code 4) or nesting past 512 levels (code 1)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonInputError(1, "Maximum stack depth exceeded") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise JsonInputError(4, f"Syntax error: {error}") from None
    if isinstance(value, dict | list) and _deeper_than(value, MAX_DEPTH):
        raise JsonInputError(1, "Maximum stack depth exceeded")
    return value


async def off_the_loop_if(large: bool, work: Callable[..., T], *args: Any) -> T:
    """Run CPU-bound `work` in a thread when the input is large, so the event loop keeps answering others."""
    if large:
        return await asyncio.to_thread(work, *args)
    return work(*args)
