"""A large JSON object read member by member from its file, in bounded memory, and optionally copied as it is read.

`json` and pydantic decode a whole document at once: a 10,000-site summary.json (24 MB) takes 80 to 140 MB.
Here only one member's value, or one element of an array with `elements()`, is decoded at a time, from a
buffer of about one chunk of text.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")


class ObjectStream:
    """The top-level object of a JSON file: `members()` yields each key, then the caller takes its value with
    `value()`, `elements()` or `replace()` (or leaves it, and it is skipped).

    With `echo`, every character read is written to it unchanged, except values taken with `replace()`, so a
    file can be rewritten with one member changed without ever holding the rest of it.
    """

    def __init__(self, file: IO[bytes], *, echo: IO[str] | None = None, chunk: int = CHUNK,
                 decoder: json.JSONDecoder | None = None) -> None:  # fmt: skip
        self._file, self._echo, self._chunk = file, echo, chunk
        self._decoder = decoder or json.JSONDecoder()
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text, self._pos, self._echoed, self._eof = "", 0, 0, False
        self._taken = True

    def members(self, *, append: Callable[[], str] | None = None) -> Iterator[str]:
        """Each key in turn; `append()` gives text to write before the closing brace (members to add)."""
        self._expect("{")
        if self._next() != "}":
            while True:
                key = self._decode()
                if not isinstance(key, str):
                    raise self._error("expected a member name")
                self._expect(":")
                self._taken = False
                yield key
                if not self._taken:
                    self._skip()
                if self._next() == "}":
                    break
                self._expect(",")
        if append is not None:
            self._write_echo(self._pos)
            self._echo_text(append())
        self._pos += 1
        self._finish()

    def value(self) -> Any:
        self._taken = True
        return self._decode()

    def elements(self) -> Iterator[Any]:
        """The value, an array, one decoded element at a time."""
        self._taken = True
        self._expect("[")
        if self._next() != "]":
            while True:
                yield self._decode()
                if self._next() == "]":
                    break
                self._expect(",")
        self._pos += 1

    def replace(self, new_text: Callable[[Any], str]) -> None:
        """Decode the value and echo `new_text(value)` in its place."""
        self._taken = True
        self._next()
        self._write_echo(self._pos)
        old = self._decode()
        self._echoed = self._pos
        self._echo_text(new_text(old))

    def _skip(self) -> None:
        if self._next() == "[":
            for _ in self.elements():
                pass
        else:
            self.value()

    def _decode(self) -> Any:
        self._next()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as error:
                if not self._refill():
                    raise self._error(error.msg) from None
                continue
            if end < len(self._text) or not self._refill():  # a number may go on in the next chunk
                self._pos = end
                return value

    def _expect(self, char: str) -> None:
        if self._next() != char:
            raise self._error(f"expected {char!r}")
        self._pos += 1

    def _next(self) -> str:
        """The next character that is not white space (not consumed)."""
        while True:
            self._pos = _SPACE.match(self._text, self._pos).end()
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._refill():
                raise self._error("unexpected end of file")

    def _refill(self) -> bool:
        if self._eof:
            return False
        self._write_echo(self._pos)
        data = self._file.read(self._chunk)
        self._eof = not data
        self._text = self._text[self._pos :] + self._utf8.decode(data, final=self._eof)
        self._pos = self._echoed = 0
        return True

    def _finish(self) -> None:
        """Only white space may follow the object."""
        while True:
            self._pos = _SPACE.match(self._text, self._pos).end()
            if self._pos < len(self._text):
                raise self._error("unexpected text after the object")
            if not self._refill():
                self._write_echo(self._pos)
                return

    def _write_echo(self, upto: int) -> None:
        if self._echo is not None and upto > self._echoed:
            self._echo.write(self._text[self._echoed : upto])
        self._echoed = max(self._echoed, upto)

    def _echo_text(self, text: str) -> None:
        if self._echo is not None:
            self._echo.write(text)

    def _error(self, what: str) -> ValueError:
        near = self._text[self._pos : self._pos + 40]
        return ValueError(f"invalid JSON: {what} (near {near!r})")
