"""Ability input and output: decoding from the query, WordPress-style coercion, and schema validation.

Validation itself is jsonschema's; this module only puts its findings in the words and the order WordPress
core's `rest_validate_value_from_schema()` uses ("input[color] does not match pattern ^#[0-9A-Fa-f]{6}$.",
"nope is not a valid property of Object."), because clients and people read those reasons.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft7Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

from emulator.json_input import JsonInputError, decode_json

MISSING: Any = object()

_BRACKETS = re.compile(r"\[([^\]]*)\]")
_INTEGER = re.compile(r"^-?\d+$")
_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_KEYWORD_RANK = {"minLength": 0, "maxLength": 0, "pattern": 1, "minimum": 0, "maximum": 0,
                 "minItems": 2, "maxItems": 2, "uniqueItems": 2, "enum": 3, "const": 3, "format": 4}


class InputDecodeError(ValueError):
    """The query's `input` could not be read as JSON or PHP bracket syntax."""


PHP_MAX_INPUT_NESTING = 64  # php.ini's max_input_nesting_level


def decode_query_input(pairs: list[tuple[str, str]]) -> Any:
    """`input` from a query string: URL-encoded JSON (`input={"a":1}`) or PHP brackets (`input[a][]=1`).

    Returns MISSING when the query carries no input at all. Bracket values stay strings, as PHP sees them.
    """
    result: Any = MISSING
    for key, value in pairs:
        if key == "input":
            text = value.strip()
            if text.startswith(("{", "[")):
                try:
                    result = decode_json(text)
                except JsonInputError as exc:
                    if exc.code == 1:  # nesting past json_decode's depth is WordPress's rest_invalid_json
                        raise
                    raise InputDecodeError(f"input is not valid JSON: {exc.message.removeprefix('Syntax error: ')}"
                                           ) from None
            else:
                result = value
            continue
        if not key.startswith("input["):
            continue
        parts = _BRACKETS.findall(key[len("input") :])
        if "".join(f"[{p}]" for p in parts) != key[len("input") :]:
            raise InputDecodeError(f"malformed input parameter {key!r}")
        if len(parts) >= PHP_MAX_INPUT_NESTING:  # PHP drops such a variable before WordPress sees the request
            continue
        if not isinstance(result, dict):
            result = {}
        _assign(result, parts, value)
    return _lists_from_numeric_maps(result)


def _assign(container: dict[str, Any], parts: list[str], value: str) -> None:
    node: Any = container
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        if part == "":
            part = str(len(node))
        if last:
            node[part] = value
            return
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child


def _lists_from_numeric_maps(value: Any) -> Any:
    """PHP arrays with keys 0..n-1 are lists."""
    if value is MISSING:
        return value
    if isinstance(value, dict):
        converted = {k: _lists_from_numeric_maps(v) for k, v in value.items()}
        keys = list(converted)
        if keys and all(k.isdigit() for k in keys) and sorted(int(k) for k in keys) == list(range(len(keys))):
            return [converted[str(i)] for i in range(len(keys))]
        return converted
    if isinstance(value, list):
        return [_lists_from_numeric_maps(v) for v in value]
    return value


def _types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    if declared is None:
        return []
    return [declared] if isinstance(declared, str) else list(declared)


def coerce(schema: Any, value: Any) -> Any:
    """Turn query strings into the types the schema wants, as WordPress's `rest_is_integer` & co accept them."""
    types = _types(schema)
    if isinstance(value, str) and types:
        if "integer" in types and _INTEGER.match(value.strip()):
            return int(value)
        if "number" in types and "string" not in types and _NUMBER.match(value.strip()):
            return float(value)
        if "boolean" in types and "string" not in types and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        if "array" in types and "string" not in types:
            return [coerce(schema.get("items", {}), part.strip()) for part in value.split(",") if part.strip()]
        if "object" in types and value == "":
            return {}
        if "null" in types and value == "" and "string" not in types:
            return None
        return value
    if isinstance(value, dict) and "object" in types:
        properties = schema.get("properties", {})
        return {k: coerce(properties[k], v) if k in properties else v for k, v in value.items()}
    if isinstance(value, dict) and "array" in types and not value:
        return []
    if isinstance(value, list) and not value and "object" in types and "array" not in types:
        return {}  # PHP's empty array is also an empty object
    if isinstance(value, list) and "array" in types:
        return [coerce(schema.get("items", {}), v) for v in value]
    return value


def with_defaults(schema: Any, value: Any) -> Any:
    """Top-level `default` for a missing input, then property defaults (the handlers read them as PHP does)."""
    if value is None and isinstance(schema, dict) and "default" in schema:
        value = coerce(schema, json.loads(json.dumps(schema["default"])))
    if isinstance(value, dict) and isinstance(schema, dict):
        for key, prop in schema.get("properties", {}).items():
            if key not in value and isinstance(prop, dict) and "default" in prop:
                value[key] = json.loads(json.dumps(prop["default"]))
    return value


# PHP cannot tell an empty array from an empty object: WordPress's `rest_is_object([])` is true.
WordPressValidator = validators.extend(
    Draft7Validator,
    type_checker=Draft7Validator.TYPE_CHECKER.redefine(
        "object", lambda _checker, instance: isinstance(instance, dict) or instance == []
    ),
)


_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def _validator(schema: Any) -> Any:
    """One compiled validator per schema object (the catalog's schemas live as long as the process)."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, WordPressValidator(schema, format_checker=FormatChecker(formats=("email",))))
        _VALIDATORS[id(schema)] = cached
    return cached[1]


def reason(schema: Any, value: Any, param: str) -> str | None:
    """The first reason WordPress would give for `value` failing `schema`, or None when it is valid."""
    errors = list(_validator(schema).iter_errors(value))
    if not errors:
        return None
    first = min(errors, key=lambda e: _order(e, value))
    return _message(first, param)


def _order(error: ValidationError, root: Any) -> tuple[Any, ...]:
    key: list[Any] = []
    node = root
    for step in error.absolute_path:
        position = list(node).index(step) if isinstance(node, dict) else step
        key.append((2, position))
        node = node[step]
    if error.validator == "type":
        key.append((0,))
    elif error.validator == "required":
        key.append((1,))
    elif error.validator == "additionalProperties":
        extras = _extra_properties(error)
        key.append((2, list(node).index(extras[0]) if extras else 0))
    else:
        key.append((3, _KEYWORD_RANK.get(str(error.validator), 5)))
    return tuple(key)


def _path(param: str, error: ValidationError) -> str:
    return param + "".join(f"[{step}]" for step in error.absolute_path)


def _extra_properties(error: ValidationError) -> list[str]:
    allowed = set(error.schema.get("properties", {}))
    patterns = list(error.schema.get("patternProperties", {}))
    return [k for k in error.instance if k not in allowed and not any(re.search(p, k) for p in patterns)]


def _wp_list(values: list[Any]) -> str:
    words = [v if isinstance(v, str) else json.dumps(v) for v in values]
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + ", and " + words[-1]


def _message(error: ValidationError, param: str) -> str:
    path = _path(param, error)
    schema = error.schema
    keyword = error.validator
    if keyword == "type":
        return f"{path} is not of type {','.join(_types(schema))}."
    if keyword == "required":
        missing = re.match(r"'(.+)' is a required property", error.message)
        name = missing.group(1) if missing else str(error.validator_value)
        return f"{name} is a required property of {path}."
    if keyword == "additionalProperties":
        extras = _extra_properties(error)
        return f"{extras[0] if extras else path} is not a valid property of Object."
    if keyword == "enum":
        choices = list(error.validator_value)
        if len(choices) == 1:
            return f"{path} is not {_wp_list(choices)}."
        return f"{path} is not one of {_wp_list(choices)}."
    if keyword == "pattern":
        return f"{path} does not match pattern {error.validator_value}."
    if keyword in ("minimum", "maximum"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"{path} must be between {low} (inclusive) and {high} (inclusive)"
        if low is not None:
            return f"{path} must be greater than or equal to {low}"
        return f"{path} must be less than or equal to {high}"
    if keyword == "minLength":
        n = error.validator_value
        return f"{path} must be at least {n} character{'s' if n != 1 else ''} long."
    if keyword == "maxLength":
        n = error.validator_value
        return f"{path} must be at most {n} character{'s' if n != 1 else ''} long."
    if keyword == "minItems":
        n = error.validator_value
        return f"{path} must contain at least {n} item{'s' if n != 1 else ''}."
    if keyword == "format" and error.validator_value == "email":
        return "Invalid email address."
    if keyword in ("oneOf", "anyOf"):
        return f"{path} is invalid (does not match any of the expected formats)."
    return f"{path}: {error.message}"
