"""The typed async client of the guard on each site: the only code that speaks HTTP to a guard.

Each request is a POST to the site's page with `X-Fleet-Guard: 1` and a signed envelope; the guard's answer is one
`FLEET-GUARD-REPORT:` line of JSON that echoes the request's nonce. A page without that line is the site answering
as WordPress would: no guard there (none installed, removed, not armed, or it refused the request). Where the
current key gets no answer, the key before a rotation is tried, and the one a site answered is remembered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from guard.keys import FleetKeys
from guard.models import Answer, GuardStatus, PauseAnswer, ProbeAnswer, RestoreAnswer
from guard.signing import MARKER, envelope, signed_body

HEADER = "X-Fleet-Guard"
A = TypeVar("A", bound=Answer)


class GuardError(Exception):
    """A call to a site's guard failed; the message names the site and the call."""


class GuardSilent(GuardError):  # noqa: N818 - it names what the site did
    """The site answered without its guard: none there, not armed, removed, or the request refused."""


class GuardRefused(GuardError):  # noqa: N818
    """The guard answered, and said no (its reason in the message)."""


@dataclass(frozen=True)
class GuardSite:
    """A site as its guard knows it (`url`, signed: the guard compares it with its home URL) and where requests to it
    go (`address`: the same URL, or where a test or emulator serves it)."""

    url: str
    address: str


def report_of(text: str) -> dict | None:
    """The guard's report in a page: the last marker line's JSON, or None."""
    at = text.rfind(MARKER)
    if at < 0:
        return None
    line = text[at + len(MARKER):].split("\n", 1)[0]
    try:
        report = json.loads(line)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


@dataclass
class GuardClient:
    http: httpx.AsyncClient
    keys: FleetKeys
    answered_with: dict[str, str] = field(default_factory=dict)  # site url -> the key it answered: current/previous
    calls: int = 0  # requests sent, for the night's figures

    async def status(self, site: GuardSite) -> GuardStatus:
        status = await self._ask(site, "status", GuardStatus)
        return status.model_copy(update={"key": self.answered_with.get(site.url, "current")})

    async def probe(self, site: GuardSite, plugins: list[str], theme: bool = False) -> ProbeAnswer:
        """The site's page with `plugins` (and, with `theme`, its theme) left out, and how it came out."""
        return await self._ask(site, "probe", ProbeAnswer, plugins=sorted(plugins), theme=theme)

    async def pause(self, site: GuardSite, plugins: list[str]) -> PauseAnswer:
        return await self._ask(site, "pause", PauseAnswer, plugins=sorted(plugins))

    async def unpause(self, site: GuardSite, plugins: list[str]) -> PauseAnswer:
        return await self._ask(site, "unpause", PauseAnswer, plugins=sorted(plugins))

    async def restore(self, site: GuardSite, type_: str, slug: str, version: str) -> RestoreAnswer:
        return await self._ask(site, "restore", RestoreAnswer, type=type_, slug=slug, version=version)

    async def _ask(self, site: GuardSite, action: str, model: type[A], **args: object) -> A:
        order = self.keys.signing_order
        known = self.answered_with.get(site.url)
        if known is not None:  # the key this site answered first
            order = sorted(order, key=lambda pair: pair[0] != known)
        for name, key in order:
            raw = envelope(site.url, action, **args)
            nonce = json.loads(raw)["nonce"]
            self.calls += 1
            try:
                response = await self.http.post(site.address, content=signed_body(key, raw),
                                                headers={HEADER: "1", "Content-Type": "application/json"})
            except httpx.HTTPError as error:
                raise GuardError(f"{site.url}: guard {action}: {type(error).__name__}: {error}") from error
            report = report_of(response.text)
            if report is None or report.get("nonce") != nonce:
                continue
            self.answered_with[site.url] = name
            try:
                answer = model.model_validate(report)
            except ValidationError as error:
                raise GuardError(f"{site.url}: guard {action}: an answer that cannot be read: "
                                 f"{error.errors()[0]['msg']}") from None
            if not answer.ok:
                raise GuardRefused(f"{site.url}: guard {action}: {answer.error or 'refused'}")
            return answer
        raise GuardSilent(f"{site.url}: guard {action}: no guard answered (the site answered as WordPress does: "
                          "none installed, not active, removed, or not built with this fleet's key)")


def as_json(model: BaseModel) -> str:
    return model.model_dump_json()
