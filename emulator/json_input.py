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


def _lone_surrogate(text: str) -> bool:
    """A UTF-16 surrogate left in a decoded string: a `\\ud800` escape with no partner (a pair decodes whole)."""
    return any("\ud800" <= char <= "\udfff" for char in text)


def _refusal(value: Any, limit: int) -> JsonInputError | None:
    """What `json_decode` refuses in a value Python accepted: nesting past `limit` levels (JSON_ERROR_DEPTH) or a
    lone surrogate in a string or key (JSON_ERROR_UTF16). Iterative: no recursion on hostile input."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if _lone_surrogate(node):
                return JsonInputError(10, "Single unpaired UTF-16 surrogate in unicode escape")
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > limit:
            return JsonInputError(1, "Maximum stack depth exceeded")
        if isinstance(node, dict):
            stack.extend((key, depth) for key in node)
            stack.extend((child, depth + 1) for child in node.values())
        else:
            stack.extend((child, depth + 1) for child in node)
    return None


def decode_json(raw: bytes | str) -> Any:
    """The JSON value, or `JsonInputError` for a syntax error (code 4), nesting past 512 levels (code 1) or a lone
    UTF-16 surrogate (code 10), as PHP's `json_decode` refuses them."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonInputError(1, "Maximum stack depth exceeded") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise JsonInputError(4, f"Syntax error: {error}") from None
    refusal = _refusal(value, MAX_DEPTH)
    if refusal is not None:
        raise refusal
    return value


async def off_the_loop_if(large: bool, work: Callable[..., T], *args: Any) -> T:
    """Run CPU-bound `work` in a thread when the input is large, so the event loop keeps answering others."""
    if large:
        return await asyncio.to_thread(work, *args)
    return work(*args)
