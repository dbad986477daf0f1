"""Fleet Guard on the emulated sites: the same requests, signature rules and answers as the PHP plugin
(guard/plugin/fleet-guard/guard.php), never kinder.

A site's guard lives in `Site.guard` (empty: none installed). Armed, it holds the public keys it was built with,
its version and mode ("must-use": the loader placed; "plugin": the loader missing, so it loads after the plugins
and answers only its status), the plugins it pauses, the versions it kept before each plugin or theme update, and
the problems it would tell (a full disk keeps nothing). A paused plugin does not run (`Site.live`): the pages and
the MainWP Child answer again, while the dashboard still lists it active, as WordPress's stored option says.
Requests go to the site's pages (`POST /__sites__/{domain}/` with `X-Fleet-Guard: 1`); whatever is not a fresh,
unused request signed by one of the site's keys for this site gets the ordinary page, as on a real site.
Nonces and the rate are remembered in memory (a restart forgets them, as a real guard's do not).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from emulator.records import Site

if TYPE_CHECKING:
    from emulator.state import FleetState

GUARD_VERSION = "1.0.0"
PROTOCOL = 1
MARKER = "FLEET-GUARD-REPORT: "
MAX_BODY = 8192
SKEW_SECONDS = 300
RATE_PER_MINUTE = 60
KEEP_VERSIONS = 3
ACTIONS = ("status", "probe", "pause", "unpause", "restore")
_NAME = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+\.php)?$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]*={0,2}$")


def _unbase64url(text: str) -> bytes | None:
    if not _BASE64URL.match(text):
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        return None


def open_body(raw: bytes, keys: list[str]) -> dict[str, Any] | None:
    """The envelope of a body signed by one of `keys` (base64 Ed25519 public keys), or None: the PHP's open_body."""
    if len(raw) > MAX_BODY:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("envelope"), str) \
            or not isinstance(body.get("signature"), str):
        return None
    signed, signature = _unbase64url(body["envelope"]), _unbase64url(body["signature"])
    if signed is None or signature is None or len(signature) != 64:
        return None
    for text in keys:
        try:
            Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True)).verify(signature, signed)
        except (InvalidSignature, ValueError, binascii.Error):
            continue
        try:
            envelope = json.loads(signed)
        except ValueError:
            return None
        return envelope if isinstance(envelope, dict) else None
    return None


def same_site(signed: str, home: str) -> bool:
    """Host, port and path compared, not the scheme: the PHP's same_site."""
    def key(url: str) -> str | None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return None
        if not parts.hostname:
            return None
        return f"{parts.hostname.lower()}{f':{port}' if port else ''}{parts.path.rstrip('/')}"

    mine = key(signed)
    return mine is not None and mine == key(home)


def fresh(envelope: dict[str, Any], home: str, now: float) -> bool:
    ts = envelope.get("ts")
    return (envelope.get("v") == PROTOCOL and type(ts) is int and isinstance(envelope.get("site"), str)
            and isinstance(envelope.get("nonce"), str) and bool(_NONCE.match(envelope["nonce"]))
            and envelope.get("action") in ACTIONS and abs(now - ts) <= SKEW_SECONDS
            and same_site(envelope["site"], home))


def arm(site: Site, keys: list[str]) -> None:
    """Fleet Guard installed and active on `site`, built with `keys` (what its kept versions were stays)."""
    kept = site.guard.get("kept", {})
    site.guard = {"armed": True, "keys": list(keys), "version": GUARD_VERSION, "mode": "must-use", "paused": [],
                  "kept": kept, "problems": {}, "disk_full": False, "corrupt": []}


def arm_sites(state: FleetState, keys: list[str], how: str) -> list[int]:
    """`--guard all|none|N`: arm the guard (built with `keys`) on every site, none, or the first N by id; the rest
    have none. Returns the armed site ids."""
    count = {"all": len(state.sites), "none": 0}.get(how)
    if count is None:
        if not how.isdigit():
            raise ValueError(f"--guard must be all, none or a number of sites, not {how!r}")
        count = int(how)
    chosen = sorted(state.sites)[:count]
    for site_id in chosen:
        arm(state.sites[site_id], keys)
        state.save_site(state.sites[site_id])
    return chosen


def armed(site: Site) -> bool:
    return bool(site.guard.get("armed")) and not site.guard.get("removed")


def keep_before_update(site: Site, item_type: str, slug: str, version: str) -> None:
    """WordPress's upgrader is about to replace `version`: an armed guard keeps it (the last few per item), unless
    its disk is full (then it says so and the update goes on)."""
    if not armed(site) or item_type not in ("plugin", "theme") or not version:
        return
    if site.guard.get("disk_full"):
        site.guard.setdefault("problems", {})["keep"] = (
            f"the disk is nearly full: {item_type} {slug} {version} was not kept")
        return
    key = f"{item_type}:{slug}"
    versions = [kept for kept in site.guard.setdefault("kept", {}).get(key, []) if kept[0] != version]
    versions.append([version, int(time.time())])
    site.guard["kept"][key] = versions[-KEEP_VERSIONS:]
    site.guard.setdefault("problems", {}).pop("keep", None)


def left_out_live(site: Site, culprit: str, plugins: set[str], theme: bool) -> bool:
    """Whether `culprit` runs in a request with `plugins` (and, with `theme`, the theme) left out."""
    kind, _, slug = culprit.partition(":")
    if (kind == "plugin" and slug in plugins) or (kind == "theme" and theme):
        return False
    return site.live(culprit)


@dataclass
class GuardDesk:
    """The emulator's guards: their memory of nonces and rate, and the calls they answered, per site."""

    nonces: dict[int, dict[str, float]] = field(default_factory=dict)
    rate: dict[int, tuple[int, int]] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)

    def verified(self, site: Site, raw: bytes, now: float | None = None) -> dict[str, Any] | None:
        """The request's envelope when the site's guard would act on it; None: the ordinary page."""
        if not armed(site):
            return None
        now = time.time() if now is None else now
        minute, count = self.rate.get(site.id, (0, 0))
        count = count + 1 if minute == int(now // 60) else 1
        self.rate[site.id] = (int(now // 60), count)
        if count > RATE_PER_MINUTE:
            return None
        envelope = open_body(raw, list(site.guard.get("keys", [])))
        if envelope is None or not fresh(envelope, site.url, now):
            return None
        seen = self.nonces.setdefault(site.id, {})
        for nonce, when in list(seen.items()):
            if when < now - 2 * SKEW_SECONDS:
                del seen[nonce]
        if envelope["nonce"] in seen:
            return None
        seen[envelope["nonce"]] = now
        self.calls[envelope["action"]] += 1
        return envelope

    def answer(self, site: Site, envelope: dict[str, Any]) -> dict[str, Any]:
        """What the site's guard does and answers (a probe's page judged as the PHP judges it)."""
        action = envelope["action"]
        if action == "status":
            return status(site)
        if site.guard.get("mode") != "must-use":
            return {"ok": False, "error": "the must-use loader is missing: the guard loads after other plugins and "
                                          f"cannot {action}"}
        if action == "restore":
            return restore(site, envelope)
        plugins = envelope.get("plugins", [])
        if not isinstance(plugins, list) or len(plugins) > 200 or any(
                not isinstance(name, str) or not _NAME.match(name) or ".." in name or name not in site.plugins
                for name in plugins):
            return {"ok": False, "error": "plugins must name installed plugins"}
        if action in ("pause", "unpause"):
            now = [name for name in site.guard.get("paused", []) if action == "pause" or name not in plugins]
            now += [name for name in plugins if action == "pause" and name not in now]
            site.guard["paused"] = now
            return {"ok": True, "paused": now}
        return probe(site, set(plugins), bool(envelope.get("theme")))


def report(site: Site, envelope: dict[str, Any], answer: dict[str, Any]) -> str:
    """The site's guard's answer line, as the PHP writes it."""
    line = {"guard": "fleet-guard", "version": site.guard.get("version", GUARD_VERSION), "protocol": PROTOCOL,
            "nonce": envelope["nonce"],
            "action": envelope["action"], **answer}
    return f"\n{MARKER}{json.dumps(line, separators=(',', ':'))}\n"


def probe(site: Site, plugins: set[str], theme: bool) -> dict[str, Any]:
    dead = left_out_live(site, site.fatal_by, plugins, theme)
    broken = dead or left_out_live(site, site.broken_by, plugins, theme)
    fatal = None
    if broken:
        culprit = site.fatal_by if dead else site.broken_by
        where = culprit.partition(":")[2] if culprit != "ground-truth" else "wp-content/themes/functions.php"
        fatal = {"message": f"Uncaught Error: Call to undefined function in {where}", "file": where, "line": 1}
    status_code = 500 if broken else site.http_code
    return {"ok": True, "status": status_code, "page_status": status_code, "up": not broken and status_code < 400,
            "fatal": fatal, "critical": broken, "bytes": 2048, "left_out": sorted(plugins), "theme_left_out": theme}


def status(site: Site) -> dict[str, Any]:
    problems = list(site.guard.get("problems", {}).values())
    if site.guard.get("mode") != "must-use":
        problems.append(f"the must-use loader is missing: {site.guard.get('loader_problem') or 'not placed'}")
    active_theme = next((slug for slug, theme in site.themes.items() if theme.active), "")
    return {
        "ok": True, "mode": site.guard.get("mode", "must-use"), "php": site.php_version, "wordpress": site.wp_version,
        "problems": problems, "paused": site.guard_paused,
        "kept": {key: [{"version": version, "bytes": 100_000, "at": at} for version, at in versions]
                 for key, versions in site.guard.get("kept", {}).items()},
        "free_bytes": 0 if site.guard.get("disk_full") else 10_000_000_000, "keep_bytes": 209_715_200,
        "plugins": {slug: {"version": item.version, "active": item.active} for slug, item in site.plugins.items()},
        "themes": {slug: item.version for slug, item in site.themes.items()}, "theme": active_theme,
    }


def restore(site: Site, envelope: dict[str, Any]) -> dict[str, Any]:
    """A kept version put back (its checksum checked first: a corrupt one is refused); the culprit's break goes
    with the release that carried it, and WordPress offers that newer release again, which breaks the site again
    if it is installed again (never kinder than the real release)."""
    item_type, slug, version = envelope.get("type"), envelope.get("slug"), envelope.get("version")
    if item_type not in ("plugin", "theme") or not isinstance(slug, str) or not isinstance(version, str):
        return {"ok": False, "error": "restore needs type (plugin or theme), slug and version"}
    key = f"{item_type}:{slug}"
    kept = [kept_version for kept_version, _ in site.guard.get("kept", {}).get(key, [])]
    items = site.items(item_type)  # type: ignore[arg-type]
    if version not in kept or slug not in items:
        return {"ok": False, "error": f"no kept version {version} of {item_type} {slug}"}
    if f"{key}@{version}" in site.guard.get("corrupt", []):
        return {"ok": False, "error": f"the kept version {version} of {item_type} {slug} is corrupt (its checksum "
                                      "differs): not restored"}
    item = items[slug]
    replaced = item.version
    item.version = version
    if replaced != version:
        item.offer = replaced  # WordPress offers the newer release again: the night holds it
    for culprit, mark in ((site.fatal_by, "load"), (site.broken_by, "break")):
        if culprit == key and replaced != version:  # the bad release goes, and breaks the site again if reinstalled
            site.fail_items[key] = mark
    if site.fatal_by == key:
        site.fatal_by = ""
    if site.broken_by == key:
        site.broken_by = ""
    return {"ok": True, "restored": {"type": item_type, "slug": slug, "version": version}, "installed": version}


def truth(site: Site) -> dict[str, Any] | None:
    """The site's guard as ground truth shows it (None: no guard installed)."""
    if not site.guard:
        return None
    return {"armed": armed(site), "removed": bool(site.guard.get("removed")), "version": site.guard.get("version"),
            "mode": site.guard.get("mode"), "paused": list(site.guard.get("paused", [])),
            "kept": {key: [version for version, _ in versions] for key, versions in site.guard.get("kept", {}).items()},
            "problems": list(site.guard.get("problems", {}).values()), "disk_full": bool(site.guard.get("disk_full")),
            "corrupt": list(site.guard.get("corrupt", [])), "keys": list(site.guard.get("keys", []))}
