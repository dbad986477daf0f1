"""Requests the guard accepts: an envelope of JSON signed with the fleet's Ed25519 key (the PHP side verifies with
sodium; the emulator's guard with `cryptography`; a shared test vector holds all three to the same bytes).

The signature covers the envelope's exact bytes, so no two sides ever need to agree on how JSON is written.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

PROTOCOL = 1
MAX_BODY = 8192  # the guard reads no more than this
SKEW_SECONDS = 300  # the guard refuses a timestamp further than this from its own clock
MARKER = "FLEET-GUARD-REPORT: "


class KeyError_(ValueError):  # noqa: N801 - KeyError is taken by the builtin
    """A key that is not a base64 Ed25519 key of 32 bytes."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_private_key() -> str:
    """A fresh private key as the home keeps it: base64 of its 32-byte seed."""
    return base64.b64encode(Ed25519PrivateKey.generate().private_bytes(
        Encoding.Raw, PrivateFormat.Raw, NoEncryption())).decode()


def private_key(text: str) -> Ed25519PrivateKey:
    try:
        seed = base64.b64decode(text.strip(), validate=True)
        if len(seed) != 32:
            raise ValueError
        return Ed25519PrivateKey.from_private_bytes(seed)
    except ValueError:
        raise KeyError_("the guard key must be base64 of a 32-byte Ed25519 seed (fleet guard keygen makes one)") \
            from None


def public_key_text(key: Ed25519PrivateKey) -> str:
    """The public key as the guard holds it in keys.php: base64 of its 32 bytes."""
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def key_id(public_text: str) -> str:
    """A short name of a public key, safe to print."""
    return public_text[:8]


def envelope(site: str, action: str, *, ts: int | None = None, nonce: str | None = None, **args: Any) -> bytes:
    """The bytes the fleet signs: which site, what to do, when, a nonce never used again, and the arguments."""
    body = {"v": PROTOCOL, "site": site, "action": action, "ts": int(time.time()) if ts is None else ts,
            "nonce": nonce or secrets.token_urlsafe(24), **args}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def signed_body(key: Ed25519PrivateKey, envelope_bytes: bytes) -> bytes:
    """The request body: the envelope and its signature, both base64url."""
    body = json.dumps({"envelope": b64url(envelope_bytes), "signature": b64url(key.sign(envelope_bytes))},
                      separators=(",", ":")).encode()
    if len(body) > MAX_BODY:
        raise ValueError(f"a guard request of {len(body)} bytes is over the guard's {MAX_BODY}")
    return body


@dataclass(frozen=True)
class Signed:
    """What a verified body carried."""

    envelope: dict[str, Any]
    raw: bytes


def verify(body: bytes, public_keys: list[str]) -> Signed | None:
    """The body's envelope if one of `public_keys` signed it (the guard's own check, for tests and tools)."""
    try:
        outer = json.loads(body)
        raw, signature = unb64url(outer["envelope"]), unb64url(outer["signature"])
        envelope_ = json.loads(raw)
    except (ValueError, KeyError, TypeError):
        return None
    for text in public_keys:
        try:
            Ed25519PublicKey.from_public_bytes(base64.b64decode(text)).verify(signature, raw)
        except (InvalidSignature, ValueError):
            continue
        return Signed(envelope_, raw) if isinstance(envelope_, dict) else None
    return None
