"""The WordPress REST layer the dashboard runs on: routes matched by regex and method, parameters from the
query, a form or a JSON body (PHP bracket syntax included), and WordPress's error body.

Handlers only parse input and shape output; they return a JSON-able body (HTTP 200) or a `RestResponse`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from email import policy as email_policy
from email.parser import BytesParser
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from emulator.json_input import JsonInputError, decode_json
from emulator.scope import EmulatorScope

if TYPE_CHECKING:
    from emulator.records import ApiKey
    from emulator.services import Emulator

EDITABLE = "POST,PUT,PATCH"
READ = "GET"


class RestError(Exception):
    """A WP_Error. Without a status WordPress answers 500 with `"data": null`."""

    def __init__(self, code: str, message: str, status: int | None = 400, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.extra = code, message, status, extra

    @property
    def http_status(self) -> int:
        return self.status or 500

    def body(self) -> dict[str, Any]:
        data = None if self.status is None else {"status": self.status, **self.extra}
        return {"code": self.code, "message": self.message, "data": data}


def no_route() -> RestError:
    return RestError("rest_no_route", "No route was found matching the URL and request method.", 404)


def invalid_param(name: str, message: str, code: str = "rest_invalid_param") -> RestError:
    return RestError(
        "rest_invalid_param",
        f"Invalid parameter(s): {name}",
        400,
        params={name: message},
        details={name: {"code": code, "message": message, "data": None}},
    )


def check_types(data: dict[str, Any], types: dict[str, str]) -> None:
    """WordPress's argument schema check for fields that take one value: an object or an array where a string
    or a number is declared is a 400 `rest_invalid_param` ("name is not of type string."), never stored."""
    for name, type_name in types.items():
        if isinstance(data.get(name), dict | list):
            raise invalid_param(name, f"{name} is not of type {type_name}.", "rest_invalid_type")


def missing_params(names: list[str]) -> RestError:
    return RestError("rest_missing_callback_param", f"Missing parameter(s): {', '.join(names)}", 400, params=names)


@dataclass
class RestResponse:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def parse_php_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """`a=1&b[]=x&b[]=y&c[k]=v` -> {"a": "1", "b": ["x", "y"], "c": {"k": "v"}} (one level, as used here)."""
    result: dict[str, Any] = {}
    for raw_key, value in pairs:
        match = re.fullmatch(r"([^\[\]]+)\[([^\[\]]*)\](.*)", raw_key)
        if not match:
            result[raw_key] = value
            continue
        name, sub, rest = match.groups()
        if rest:  # deeper nesting: keep the innermost key text
            sub = sub + rest
        if sub == "":
            current = result.get(name)
            result[name] = [*current, value] if isinstance(current, list) else [value]
        else:
            current = result.get(name)
            target = current if isinstance(current, dict) else {}
            target[sub] = value
            result[name] = target
    return result


@dataclass
class RestRequest(EmulatorScope):
    """One parsed request under `/{ns}/v1|v2`: parameters merged from query, form and JSON body."""

    emulator: Emulator
    method: str
    path: str
    query: dict[str, Any]
    form: dict[str, Any]
    json_body: Any
    content_type: str
    path_params: dict[str, str] = field(default_factory=dict)
    key: ApiKey | None = None

    @property
    def params(self) -> dict[str, Any]:
        merged = dict(self.query)
        merged.update(self.form)
        if isinstance(self.json_body, dict):
            merged.update(self.json_body)
        return merged

    def get(self, name: str, default: Any = None) -> Any:
        value = self.params.get(name, default)
        return default if value is None else value

    def has(self, name: str) -> bool:
        return name in self.params

    def text(self, name: str, default: str = "") -> str:
        value = self.get(name, default)
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, int | float | str):
            return str(value)
        raise invalid_param(name, f"{name} is not of type string.", "rest_invalid_type")

    def optional_text(self, name: str) -> str | None:
        """A scalar parameter as text, None when absent or empty; an array or object is a 400."""
        value = self.get(name)
        if value is None or value == "":
            return None
        return self.text(name)

    def integer(
        self, name: str, default: int | None = None, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.get(name)
        if value is None or value == "":
            return default
        try:
            number = int(str(value).strip()) if not isinstance(value, bool) else int(value)
        except ValueError:
            raise invalid_param(name, f"{name} is not of type integer.", "rest_invalid_type") from None
        if minimum is not None and number < minimum:
            raise invalid_param(name, f"{name} must be greater than or equal to {minimum}", "rest_out_of_bounds")
        if maximum is not None and number > maximum:
            raise invalid_param(
                name, f"{name} must be between {minimum or 0} ({minimum or 0}) and {maximum}", "rest_out_of_bounds"
            )
        return number

    def boolean(self, name: str, default: bool | None = None) -> bool | None:
        value = self.get(name)
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise invalid_param(name, f"{name} is not of type boolean.", "rest_invalid_type")

    def id_list(self, name: str) -> list[int] | None:
        """A comma list or an array of positive ids; None when absent."""
        value = self.get(name)
        if value is None or value == "" or value == []:
            return None
        items = (
            value
            if isinstance(value, list)
            else (list(value.values()) if isinstance(value, dict) else str(value).split(","))
        )
        ids = []
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            if not text.isdigit():
                raise invalid_param(name, f"{name}[{len(ids)}] is not of type integer.", "rest_invalid_type")
            ids.append(int(text))
        return ids

    def str_list(self, name: str) -> list[str] | None:
        value = self.get(name)
        if value is None or value == "":
            return None
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        if isinstance(value, dict):
            return [str(k).strip() for k in value]
        return [part.strip() for part in str(value).split(",") if part.strip()]


Handler = Callable[[RestRequest], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    pattern: re.Pattern[str]
    handler: Handler
    module: str | None
    label: str  # the pattern written as a path template: `/sites/{id_domain}/sync`


def path_template(pattern: str) -> str:
    """`/sites/(?P<id_domain>[a-z(]+)/sync` -> `/sites/{id_domain}/sync` (named groups become placeholders)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("(?P<", i):
            name = pattern[i + 4 : pattern.index(">", i)]
            depth, j = 0, i
            while j < len(pattern):
                if pattern[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(pattern[j], 0)
                j += 1
                if depth == 0:
                    break
            out.append("{" + name + "}")
            i = j
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out).replace("\\", "")


class RestRoutes:
    """Routes of one namespace version; patterns are relative (`/sites/(?P<id>\\d+)`)."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, methods: str, pattern: str, module: str | None = None) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            compiled = re.compile(pattern + r"/?")
            self.routes.append(Route(frozenset(methods.split(",")), compiled, handler, module, path_template(pattern)))
            return handler

        return register

    def include(self, other: RestRoutes) -> None:
        self.routes.extend(other.routes)

    def match(self, method: str, path: str, enabled_modules: frozenset[str]) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.module is not None and route.module not in enabled_modules:
                continue
            found = route.pattern.fullmatch(path)
            if found and (method in route.methods or (method == "HEAD" and "GET" in route.methods)):
                return route, {k: v for k, v in found.groupdict().items() if v is not None}
        return None


def parse_body(content_type: str, raw: bytes) -> tuple[dict[str, Any], Any]:
    """(form fields, JSON value). Malformed or too deeply nested JSON is WordPress's 400 `rest_invalid_json`."""
    if not raw:
        return {}, None
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return {}, decode_json(raw)
        except JsonInputError as error:
            raise RestError(
                "rest_invalid_json",
                "Invalid JSON body passed.",
                400,
                json_error_code=error.code,
                json_error_message=error.message,
            ) from None
    if kind == "application/x-www-form-urlencoded":
        try:
            return parse_php_pairs(parse_qsl(raw.decode("utf-8"), keep_blank_values=True)), None
        except UnicodeDecodeError:
            raise RestError("rest_invalid_param", "The request body is not valid UTF-8.", 400) from None
    if kind == "multipart/form-data":
        return parse_multipart(content_type, raw), None
    return {}, None


def parse_multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """Form fields and uploaded files (as text) of a multipart body, with the standard library's parser."""
    message = BytesParser(policy=email_policy.default).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    if not message.is_multipart():
        raise RestError("rest_invalid_param", "The multipart body could not be read.", 400)
    pairs = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            continue
        payload = part.get_payload(decode=True) or b""
        pairs.append((str(name), payload.decode("utf-8", errors="replace")))
    return parse_php_pairs(pairs)


def page_slice(items: list[Any], page: int | None, per_page: int | None, default_per_page: int | None) -> list[Any]:
    """WordPress paging; per_page 0 (or no page size at all) means every row."""
    size = default_per_page if per_page is None else per_page
    if not size:
        return items
    start = ((page or 1) - 1) * size
    return items[start : start + size]
