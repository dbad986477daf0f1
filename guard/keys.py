"""The fleet's guard keys: made, rotated and read, from the home's `.env` or a Prefect Secret block.

Rotation keeps the key before as the previous one: the guards built with it accept only it until the rebuilt guard
(`fleet guard build`, which carries the new public key alone) is installed, so the client falls back to it and
`fleet guard status` names the sites still on it. The next rotation drops it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from dotenv import set_key

from guard.settings import GuardSettings
from guard.signing import key_id, new_private_key, private_key, public_key_text

KEY_VARIABLE = "FLEET_GUARD_KEY"
PREVIOUS_VARIABLE = "FLEET_GUARD_PREVIOUS_KEY"


class GuardKeyMissing(LookupError):  # noqa: N818 - it names what is missing
    """No guard key: `fleet guard keygen` makes one."""


@dataclass(frozen=True)
class FleetKeys:
    """The key the fleet signs with, and the one before a rotation (tried where the current one is refused)."""

    current: Ed25519PrivateKey
    previous: Ed25519PrivateKey | None = None

    @property
    def signing_order(self) -> list[tuple[str, Ed25519PrivateKey]]:
        keys = [("current", self.current)] + ([("previous", self.previous)] if self.previous else [])
        return keys

    @property
    def public(self) -> str:
        return public_key_text(self.current)

    def __repr__(self) -> str:  # never the keys
        return f"FleetKeys(current={key_id(self.public)}…, previous={'yes' if self.previous else 'no'})"


def load_keys(settings: GuardSettings | None = None) -> FleetKeys:
    """The fleet's keys from the block named by FLEET_GUARD_KEY_BLOCK, else from FLEET_GUARD_KEY(_PREVIOUS)."""
    settings = settings or GuardSettings()
    current, previous = settings.guard_key, settings.guard_previous_key
    texts = ((current.get_secret_value() if current else None), (previous.get_secret_value() if previous else None))
    if settings.guard_key_block:
        texts = _block_keys(settings.guard_key_block)
    if not texts[0]:
        raise GuardKeyMissing("no guard key: run `fleet guard keygen` (it writes FLEET_GUARD_KEY to the home's .env)")
    return FleetKeys(private_key(texts[0]), private_key(texts[1]) if texts[1] else None)


def _block_keys(name: str) -> tuple[str | None, str | None]:
    from prefect.blocks.system import Secret

    value = Secret.load(name, _sync=True).get()  # type: ignore[call-arg]
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise GuardKeyMissing(f"the Secret block {name!r} must hold {{\"key\": ..., \"previous_key\": ...}}")
    return data.get("key"), data.get("previous_key")


@dataclass(frozen=True)
class KeyChange:
    public: str
    previous_public: str | None
    where: str


def generate(home: Path, rotate: bool = False, block: str | None = None) -> KeyChange:
    """Make the fleet's key (with `rotate`, a new one, the old kept as the previous), in the home's `.env` (made
    private) or the Prefect Secret block `block`. Refuses to replace a key without `rotate`."""
    existing = _existing(home, block)
    if existing[0] and not rotate:
        raise FileExistsError("a guard key exists already: `fleet guard keygen --rotate` replaces it (the guards "
                              "built with the old one keep accepting it until the rebuilt guard is installed)")
    fresh = new_private_key()
    previous = existing[0] if rotate else None
    if block:
        from prefect.blocks.system import Secret

        Secret(value=json.dumps({"key": fresh, "previous_key": previous})).save(  # type: ignore[call-arg]
            block, overwrite=True, _sync=True)  # a sync call, also from inside an event loop
        where = f"the Prefect Secret block {block!r}"
    else:
        env = home / ".env"
        home.mkdir(parents=True, exist_ok=True)
        env.touch(mode=0o600, exist_ok=True)
        os.chmod(env, 0o600)
        set_key(env, KEY_VARIABLE, fresh, quote_mode="never")
        set_key(env, PREVIOUS_VARIABLE, previous or "", quote_mode="never")
        where = str(env)
    return KeyChange(public_key_text(private_key(fresh)),
                     public_key_text(private_key(previous)) if previous else None, where)


def _existing(home: Path, block: str | None) -> tuple[str | None, str | None]:
    if block:
        from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

        try:
            return _block_keys(block)
        except (ValueError, ObjectNotFound, PrefectHTTPStatusError):  # no such block yet
            return None, None
    from dotenv import dotenv_values

    env = home / ".env"
    values = dotenv_values(env) if env.is_file() else {}
    return values.get(KEY_VARIABLE) or None, values.get(PREVIOUS_VARIABLE) or None
