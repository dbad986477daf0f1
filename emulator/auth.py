"""Credentials: REST API keys (ck_/cs_ pairs, the secret stored as a salted hash), legacy v1 keys and the
WordPress application password the Abilities interface uses. Every secret comparison is constant-time."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from emulator.records import ApiKey, V1Key

if TYPE_CHECKING:
    from emulator.config import EmulatorConfig

APP_USER = "admin"
V2_PERMISSIONS = {"read": "read", "write": "write", "read,write": "read_write", "both": "read_write"}
PERMISSION_LABELS = {
    "read": ["Read"],
    "write": ["Write & Delete"],
    "delete": ["Write & Delete"],
    "read_write": ["Read", "Write & Delete"],
}
METHOD_NEEDS = {"GET": "read", "HEAD": "read", "POST": "write", "PUT": "write", "PATCH": "write", "DELETE": "delete"}
ALLOWED = {
    "read": {"read", "read_write"},
    "write": {"write", "read_write"},
    "delete": {"write", "read_write", "delete"},
}


class CredentialStore(Protocol):
    """The part of the dashboard's state the credentials live in: `FleetState`'s. A Protocol, because the state
    issues its bootstrap credentials here when it opens, so this module cannot import it back."""

    config: EmulatorConfig
    meta: dict[str, Any]
    api_keys: dict[int, ApiKey]
    keys_by_hash: dict[str, int]
    v1_keys: dict[str, V1Key]
    now: Callable[[], float]

    def next_id(self, kind: str, existing: dict[int, Any]) -> int: ...

    def save_meta(self) -> None: ...

    def save_api_key(self, key: ApiKey) -> None: ...

    def delete_api_key(self, key: ApiKey) -> None: ...

    def save_v1_key(self, key: V1Key) -> None: ...

    def delete_v1_key(self, ck_hash: str) -> None: ...


class AuthFailure(Exception):
    """A refused credential; `code` is namespaced, the HTTP status is always 401 as on the real dashboard."""

    def __init__(self, code: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.body = body if body is not None else {"code": code, "message": message, "data": {"status": 401}}


def _hash_secret(secret: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{secret}".encode()).hexdigest()


def hash_consumer_key(state: CredentialStore, consumer_key: str) -> str:
    """The lookup hash of a consumer key (the dashboard's `hash_hmac('sha256', ck, '<ns>-api')`)."""
    return hmac.new(f"{state.config.namespace}-api".encode(), consumer_key.encode(), hashlib.sha256).hexdigest()


def new_key_pair() -> tuple[str, str]:
    return "ck_" + secrets.token_hex(20), "cs_" + secrets.token_hex(20)


def bearer_token(consumer_key: str, consumer_secret: str) -> str:
    """`<secret hex>==<key hex>`, exactly what add-key returns as `token`."""
    return f"{consumer_secret.removeprefix('cs_')}=={consumer_key.removeprefix('ck_')}"


def create_api_key(
    state: CredentialStore, description: str, permissions: str, enabled: bool = True
) -> tuple[ApiKey, str, str]:
    """A new v2 key; the plaintext pair is returned once and never stored."""
    consumer_key, consumer_secret = new_key_pair()
    salt = secrets.token_hex(8)
    key = ApiKey(
        key_id=state.next_id("api_key", state.api_keys),
        description=description,
        permissions=permissions,
        ck_hash=hash_consumer_key(state, consumer_key),
        cs_hash=_hash_secret(consumer_secret, salt),
        cs_salt=salt,
        truncated_key=consumer_key[-7:],
        enabled=enabled,
    )
    state.save_api_key(key)
    return key, consumer_key, consumer_secret


def create_v1_key(
    state: CredentialStore,
    consumer_key: str,
    consumer_secret: str,
    description: str,
    perms: str,
    enabled: bool = True,
) -> V1Key:
    salt = secrets.token_hex(8)
    key = V1Key(
        ck_hash=hash_consumer_key(state, consumer_key),
        truncated_key=consumer_key[-7:],
        description=description,
        perms=perms,
        cs_hash=_hash_secret(consumer_secret, salt),
        cs_salt=salt,
        enabled=enabled,
    )
    state.save_v1_key(key)
    return key


def find_api_key(state: CredentialStore, identifier: str) -> ApiKey | None:
    """By numeric key id or by `ck_<40 hex>` consumer key."""
    if identifier.isdigit():
        return state.api_keys.get(int(identifier))
    key_id = state.keys_by_hash.get(hash_consumer_key(state, identifier))
    return None if key_id is None else state.api_keys.get(key_id)


BOOTSTRAP_KEYS = (
    ("read_write", "read_write", "r,w,d", True),
    ("read", "read", "r", True),
    ("disabled", "read_write", "r,w,d", False),
)


def bootstrap_credentials(state: CredentialStore) -> None:
    """The keys a fresh dashboard starts with: read_write, read and disabled (each also a v1 key, as the
    dashboard's UI writes both stores), and an application password. Only salted hashes are stored; the
    plaintext lives in memory (`meta["bootstrap"]`, never written) and in the credentials file."""
    plain: dict[str, Any] = {"api_keys": {}}
    ids: dict[str, int] = {}
    for role, permissions, perms, enabled in BOOTSTRAP_KEYS:
        key, consumer_key, consumer_secret = create_api_key(state, f"emulator {role} key", permissions, enabled)
        create_v1_key(state, consumer_key, consumer_secret, f"emulator {role} key", perms, enabled)
        plain["api_keys"][role] = {"consumer_key": consumer_key, "consumer_secret": consumer_secret}
        ids[role] = key.key_id
    password = " ".join(secrets.token_hex(2) for _ in range(6))
    salt = secrets.token_hex(8)
    state.meta["application_password"] = {
        "username": APP_USER,
        "hash": _hash_secret(password.replace(" ", ""), salt),
        "salt": salt,
    }
    plain["application_password"] = {"username": APP_USER, "password": password}
    state.meta["bootstrap"] = plain
    state.meta["bootstrap_key_ids"] = ids
    state.save_meta()


def _still_valid(state: CredentialStore, previous: dict[str, Any]) -> bool:
    """Whether a credentials file's bootstrap keys and application password still open this dashboard."""
    try:
        keys = previous["api_keys"]
        ids = state.meta.setdefault("bootstrap_key_ids", {})
        for role, _permissions, _perms, _enabled in BOOTSTRAP_KEYS:
            secret, _, key_hex = keys[role].partition("==")
            key = find_api_key(state, "ck_" + key_hex)
            if key is None or ids.get(role, key.key_id) != key.key_id:
                return False
            if not hmac.compare_digest(_hash_secret("cs_" + secret, key.cs_salt), key.cs_hash):
                return False
            ids[role] = key.key_id
        app = previous["application_password"]
        return verify_application_password(state, app["username"], app["password"])
    except (KeyError, TypeError, AttributeError):
        return False


def restore_bootstrap_credentials(state: CredentialStore, previous: dict[str, Any] | None) -> None:
    """After a restart the database holds only hashes: take the plaintext back from the previous credentials
    file when it still matches, or else issue fresh bootstrap credentials (the old ones stop working)."""
    if previous is not None and _still_valid(state, previous):
        keys = {}
        for role, token in previous["api_keys"].items():
            secret, _, key_hex = token.partition("==")
            keys[role] = {"consumer_key": "ck_" + key_hex, "consumer_secret": "cs_" + secret}
        state.meta["bootstrap"] = {"api_keys": keys, "application_password": dict(previous["application_password"])}
        return
    for key_id in state.meta.get("bootstrap_key_ids", {}).values():
        key = state.api_keys.get(key_id)
        if key is not None:
            state.delete_api_key(key)
            state.delete_v1_key(key.ck_hash)
    bootstrap_credentials(state)


def verify_application_password(state: CredentialStore, username: str, password: str) -> bool:
    """The WordPress application-password check the Abilities interface uses (spaces are ignored)."""
    record = state.meta.get("application_password")
    if not record:
        return False
    same_user = hmac.compare_digest(username.encode(), record["username"].encode())
    same_password = hmac.compare_digest(_hash_secret(password.replace(" ", ""), record["salt"]), record["hash"])
    return same_user and same_password


def parse_basic(authorization: str) -> tuple[str, str] | None:
    if not authorization.lower().startswith("basic "):
        return None
    try:
        user, _, password = base64.b64decode(authorization[6:].strip()).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return user, password


def _v2_pair(headers: Mapping[str, str], query: Mapping[str, Any], ns: str) -> tuple[str, str] | None:
    """Credentials in the dashboard's order: query pair, Basic, then Bearer. None when there are none."""
    ck, cs = query.get("consumer_key"), query.get("consumer_secret")
    if isinstance(ck, str) and isinstance(cs, str) and ck and cs:
        return ck, cs
    authorization = headers.get("authorization", "")
    basic = parse_basic(authorization)
    if basic is not None:
        return basic
    if authorization.lower().startswith("bearer "):
        token = authorization[7:].strip()
        secret, sep, key = token.partition("==")
        if not sep or not secret or not key:
            raise AuthFailure(f"{ns}_rest_authentication_missing_parameter", "Invalid OAuth parameter.")
        return "ck_" + key, "cs_" + secret
    return None


def check_api_key(state: CredentialStore, consumer_key: str, consumer_secret: str) -> ApiKey:
    ns = state.config.namespace
    key_id = state.keys_by_hash.get(hash_consumer_key(state, consumer_key))
    key = None if key_id is None else state.api_keys.get(key_id)
    if key is None or not key.enabled:
        raise AuthFailure(f"{ns}_rest_authentication_disabled_key", "The REST API Key are disabled.")
    if not hmac.compare_digest(_hash_secret(consumer_secret, key.cs_salt), key.cs_hash):
        raise AuthFailure(f"{ns}_rest_authentication_error", "Consumer secret is invalid.")
    return key


def check_method(state: CredentialStore, key: ApiKey, method: str) -> None:
    need = METHOD_NEEDS.get(method.upper())
    if need is not None and key.permissions not in ALLOWED[need]:
        raise AuthFailure(
            f"{state.config.namespace}_rest_authentication_error",
            f"The API key provided does not have {need} permissions.",
        )


def authenticate_v2(
    state: CredentialStore, method: str, headers: Mapping[str, str], query: Mapping[str, Any]
) -> ApiKey:
    """A REST v2 request's key, or AuthFailure with the dashboard's exact 401 body."""
    ns = state.config.namespace
    pair = _v2_pair(headers, query, ns)
    if pair is None:
        raise AuthFailure(f"{ns}_rest_authentication_error", "You are not authenticated.")
    key = check_api_key(state, *pair)
    check_method(state, key, method)
    key.last_access = state.now()
    return key


V1_ERROR = (
    "Incorrect or missing consumer key and/or secret. If the issue persists please reset your "
    "authentication details from the {brand} &gt; Settings &gt; REST API page, on your {brand} Dashboard site."
)


def authenticate_v1(
    state: CredentialStore, method: str, headers: Mapping[str, str], query: Mapping[str, Any]
) -> V1Key:
    """Legacy v1: query pair or X-Api-Key JSON header; the v2 key check also runs first, as on the real one."""
    ns = state.config.namespace
    brand = "MainWP" if ns == "mainwp" else ns.upper()
    ck, cs = query.get("consumer_key"), query.get("consumer_secret")
    header = headers.get("x-api-key")
    if (not ck or not cs) and header:
        try:
            data = json.loads(header)
            ck, cs = data.get("consumer_key"), data.get("consumer_secret")
        except (ValueError, AttributeError):
            ck = cs = None
    refused = AuthFailure("v1_refused", "legacy credentials refused", body={"ERROR": V1_ERROR.format(brand=brand)})
    if not isinstance(ck, str) or not isinstance(cs, str) or not ck or not cs:
        raise refused
    check_api_key(state, ck, cs)
    key = state.v1_keys.get(hash_consumer_key(state, ck))
    if key is None or not key.enabled or not hmac.compare_digest(_hash_secret(cs, key.cs_salt), key.cs_hash):
        raise refused
    letter = {"GET": "r", "HEAD": "r", "DELETE": "d"}.get(method.upper(), "w")
    if letter not in key.perms.split(","):
        word = {"r": "Read", "w": "Write", "d": "Delete"}[letter]
        raise AuthFailure("rest_method_not_allowed", f"Sorry, you are not allowed to do the {word} method.")
    return key
