"""A Wordfence Intelligence v3 feed about the emulator's own fleet, and a generator of a feed of the real size.

`GET /__emulator__/vulnerabilities/production` answers what Wordfence's production feed answers (one JSON object
keyed by record id; bearer auth: the emulator's admin token stands in for the Wordfence key; 401 without it),
drawn from the seed's catalogue: some plugins vulnerable and fixed in the release the fleet is offered, some fixed
only in a later release, some with no fix at all, a theme and WordPress core; and some records published between
nights, shown only once the dashboard's clock reaches their `published` moment (`LATE_HOURS` after the fleet was
made), or at once through `POST /__emulator__/vulnerabilities/publish`. `POST /__emulator__/vulnerabilities/fault`
makes the feed answer as a bad day would: 401, 403, 410, 429 (with Retry-After), a cut-off body, broken JSON, an
empty body, or a record with odd versions.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from emulator.fleet import CORE_LATEST, PLUGINS, THEMES, _bump
from emulator.ground_truth import PREFIX, GroundTruthError, _authorised, admin_only, json_object

if TYPE_CHECKING:
    from emulator.services import Emulator

LATE_HOURS = 12  # the seed's records published between nights: this long after the fleet was made
FAULTS = ("401", "403", "410", "429", "cut", "broken", "empty", "odd")
_COPYRIGHTS = {
    "message": "This record contains material that is subject to copyright",
    "defiant": {"notice": "Copyright 2012-2026 Defiant Inc.", "license": "Defiant hereby grants you a perpetual, "
                "worldwide, non-exclusive, no-charge, royalty-free, irrevocable copyright license to reproduce, "
                "prepare derivative works of, publicly display, publicly perform, sublicense, and distribute this "
                "software vulnerability information.", "license_url": "https://www.wordfence.com/wordfence-"
                "intelligence-terms-and-conditions/"},
    "mitre": {"notice": "Copyright 1999-2026 The MITRE Corporation", "license": "CVE Usage: MITRE hereby grants "
              "you a perpetual, worldwide, non-exclusive, no-charge, royalty-free, irrevocable copyright license "
              "to reproduce, prepare derivative works of, publicly display, publicly perform, sublicense, and "
              "distribute Common Vulnerabilities and Exposures (CVE).", "license_url": "https://www.cve.org/Legal/"
              "TermsOfUse"},
}
_KINDS = ("Cross-Site Scripting", "Missing Authorization", "SQL Injection", "Cross-Site Request Forgery",
          "Sensitive Information Exposure", "Arbitrary File Upload", "PHP Object Injection")


def feed_slug(dashboard_slug: str) -> str:
    """The slug the feed knows a plugin by: its directory (`akismet/akismet.php` -> `akismet`)."""
    return dashboard_slug.split("/")[0].removesuffix(".php").lower()


def _rating(score: float) -> str:
    return "Critical" if score >= 9 else "High" if score >= 7 else "Medium" if score >= 4 else "Low"


def record(rng: random.Random, type_: str, slug: str, name: str, *, to_version: str, to_inclusive: bool,
           patched: list[str], published: datetime, from_version: str = "*", padding: int = 0) -> dict[str, Any]:
    """One v3 record (the fields Wordfence sends, in its shape); `padding` words of description."""
    record_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    score = round(rng.uniform(4.0, 9.8), 1)
    kind = rng.choice(_KINDS)
    cve = f"CVE-{published.year}-{rng.randrange(10000, 99999)}"
    label = f"{from_version} - {to_version}"
    when = published.strftime("%Y-%m-%d %H:%M:%S")
    description = f"The {name} {type_} for WordPress is vulnerable to {kind} in versions up to {to_version}."
    if padding:
        description += " " + " ".join(rng.choice(_KINDS).lower() for _ in range(padding))
    return {
        "id": record_id,
        "title": f"{name} <= {to_version} - {kind}",
        "software": [{
            "type": type_, "name": name, "slug": slug,
            "affected_versions": {label: {"from_version": from_version, "from_inclusive": True,
                                          "to_version": to_version, "to_inclusive": to_inclusive}},
            "patched": bool(patched), "patched_versions": patched,
            "remediation": f"Update to version {patched[0]}, or a newer patched version" if patched
            else "No known patch available. Please review the vulnerability's details in depth and employ "
                 "mitigations based on your organization's risk tolerance.",
        }],
        "informational": False,
        "description": description,
        "references": [f"https://www.wordfence.com/threat-intel/vulnerabilities/id/{record_id}?source=api-prod",
                       f"https://plugins.trac.wordpress.org/changeset/{rng.randrange(10**6, 10**7)}/{slug}"],
        "cwe": {"id": 79, "name": kind, "description": f"{kind}."},
        "cvss": {"vector": "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", "score": score, "rating": _rating(score)},
        "cve": cve, "cve_link": f"https://www.cve.org/CVERecord?id={cve}",
        "researchers": ["Emulated Researcher"],
        "published": when, "updated": when,
        "copyrights": _COPYRIGHTS,
    }


def fleet_records(seed: int, created: float) -> list[tuple[float, dict[str, Any]]]:
    """The seed's records about its own catalogue, each with the dashboard moment it is published at."""
    rng = random.Random(f"{seed}-vulnerabilities")
    records: list[tuple[float, dict[str, Any]]] = []

    def add(at: float, type_: str, slug: str, name: str, **bounds: Any) -> None:
        records.append((at, record(rng, type_, slug, name, published=datetime.fromtimestamp(at, UTC), **bounds)))

    for dashboard_slug, name, latest in PLUGINS:
        roll, before = rng.random(), created - rng.randrange(1, 400) * 86400
        slug = feed_slug(dashboard_slug)
        if roll < 0.3:  # fixed in the release the fleet is offered
            add(before, "plugin", slug, name, to_version=latest, to_inclusive=False, patched=[latest])
        elif roll < 0.4:  # fixed only in a later release than most sites are offered
            add(before, "plugin", slug, name, to_version=latest, to_inclusive=True, patched=[_bump(latest, rng)])
        elif roll < 0.5:  # no fix at all
            add(before, "plugin", slug, name, to_version=latest, to_inclusive=True, patched=[])
        elif roll < 0.6:  # published between nights, fixed in the offered release
            add(created + LATE_HOURS * 3600, "plugin", slug, name, to_version=latest, to_inclusive=False,
                patched=[latest])
        else:  # an old record: every release the fleet runs is past it
            add(before, "plugin", slug, name, from_version="0.1", to_version="0.9", to_inclusive=True,
                patched=["1.0"])
    slug, name, latest = THEMES[rng.randrange(len(THEMES))]
    add(created - 30 * 86400, "theme", slug, name, to_version=latest, to_inclusive=False, patched=[latest])
    add(created - 20 * 86400, "core", "wordpress", "WordPress", to_version=CORE_LATEST, to_inclusive=False,
        patched=[CORE_LATEST])
    return records


def _body(emulator: Emulator) -> bytes:
    now = emulator.clock.now()
    visible = [data for at, data in fleet_records(emulator.config.seed, emulator.state.meta.get("created", now))
               if at <= now]
    visible += emulator.feed.published
    return json.dumps({data["id"]: data for data in visible}).encode()


async def production_feed(request: Request) -> Response:
    emulator: Emulator = request.app.state.emulator
    control = emulator.feed
    fault = control.fault
    if fault in ("401", "403", "410"):
        return Response(json.dumps({"message": "Unauthorized"}), int(fault), media_type="application/json")
    if fault == "429":
        return Response(json.dumps({"message": "Too many requests"}), 429, media_type="application/json",
                        headers={"Retry-After": str(control.retry_after)})
    if not _authorised(request, emulator):
        return Response(json.dumps({"message": "A valid API key is required"}), 401, media_type="application/json")
    body = _body(emulator)
    if fault == "empty":
        return Response(b"", 200, media_type="application/json")
    if fault == "broken":
        return Response(body[: len(body) // 2] + b"}}", 200, media_type="application/json")
    if fault == "odd":
        odd = record(random.Random(1), "plugin", "odd-plugin", "Odd Plugin", to_version="1.0", to_inclusive=True,
                     patched=[], published=datetime.fromtimestamp(emulator.clock.now(), UTC))
        odd["software"][0]["affected_versions"] = {"1.0": {"from_version": 1.0, "to_version": ["1", "2"]}}
        body = body[:-1] + (b", " if len(body) > 2 else b"") + json.dumps(odd["id"]).encode() + b": " \
            + json.dumps(odd).encode() + b"}"
    if fault == "cut":
        async def cut_off() -> AsyncIterator[bytes]:
            yield body[: len(body) // 2]  # then the connection closes before Content-Length is reached
        return StreamingResponse(cut_off(), 200, media_type="application/json",
                                 headers={"Content-Length": str(len(body))})
    return Response(body, 200, media_type="application/json")


async def set_fault(request: Request, emulator: Emulator) -> dict[str, Any]:
    """{"fault": one of FAULTS or null, "retry_after": seconds}"""
    body = await json_object(request)
    fault = body.get("fault")
    if fault is not None and fault not in FAULTS:
        raise GroundTruthError(f"fault must be one of {', '.join(FAULTS)} or null")
    control = emulator.feed
    control.fault = fault
    retry = body.get("retry_after", control.retry_after)
    if not isinstance(retry, int) or retry < 0:
        raise GroundTruthError("retry_after must be a whole number of seconds")
    control.retry_after = retry
    return {"fault": fault, "retry_after": retry}


async def publish(request: Request, emulator: Emulator) -> dict[str, Any]:
    """{"type": "plugin", "slug": dashboard slug, "to_version": ..., "to_inclusive": bool, "patched": [...]}:
    a vulnerability published now (between nights, as the feed would)."""
    body = await json_object(request)
    type_ = body.get("type", "plugin")
    slug, to_version = body.get("slug"), body.get("to_version")
    if type_ not in ("plugin", "theme", "core") or not isinstance(slug, str) or not isinstance(to_version, str):
        raise GroundTruthError('send {"type": "plugin"|"theme"|"core", "slug": "...", "to_version": "..."}')
    patched = body.get("patched", [])
    if not isinstance(patched, list) or not all(isinstance(v, str) for v in patched):
        raise GroundTruthError("patched must be a list of versions")
    control = emulator.feed
    rng = random.Random(f"{emulator.config.seed}-published-{len(control.published)}")
    data = record(rng, type_, feed_slug(slug), body.get("name") or slug, to_version=to_version,
                  to_inclusive=body.get("to_inclusive", True) is not False, patched=patched,
                  published=datetime.fromtimestamp(emulator.clock.now(), UTC))
    control.published.append(data)
    return data


def vulnerability_routes() -> list[Route]:
    return [
        Route(f"{PREFIX}/vulnerabilities/production", production_feed, methods=["GET"]),
        Route(f"{PREFIX}/vulnerabilities/fault", admin_only(set_fault), methods=["POST"]),
        Route(f"{PREFIX}/vulnerabilities/publish", admin_only(publish), methods=["POST"]),
    ]


def _generated(rng: random.Random, slugs: list[str], published: datetime) -> Iterator[dict[str, Any]]:
    while True:
        slug = rng.choice(slugs)
        latest = f"{rng.randrange(1, 12)}.{rng.randrange(0, 20)}.{rng.randrange(0, 30)}"
        fixed = rng.random() < 0.8
        yield record(rng, "plugin", slug, slug.replace("-", " ").title(), to_version=latest,
                     to_inclusive=not fixed, patched=[_bump(latest, rng)] if fixed else [], published=published,
                     padding=rng.randrange(40, 120))


def write_feed(path: Path, *, size_bytes: int, slugs: list[str], seed: int = 0) -> int:
    """A feed of about `size_bytes` (Wordfence's is about 158 MB, 42,500 records) over `slugs`, written record by
    record; returns the records written."""
    rng = random.Random(seed)
    published = datetime(2026, 10, 1, tzinfo=UTC)
    written = count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("{")
        for data in _generated(rng, slugs, published):
            text = ("," if count else "") + json.dumps(data["id"]) + ":" + json.dumps(data, indent=1)
            out.write(text)
            written += len(text)
            count += 1
            if written >= size_bytes:
                break
        out.write("}\n")
    return count
