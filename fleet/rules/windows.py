"""Maintenance windows and blackout dates: when each site may be touched, in its client's own time zone.

A site's window comes from its client, else the first of its tags that has one, else the default. Outside its
window, or on a blackout date, a site is deferred: reported with the reason and the moment its window next
opens, never touched. The policy file's `windows` and `blackouts` sections are these models.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any, Protocol, Self, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
LOOKAHEAD_DAYS = 400  # a window that does not open within this many days is reported as never opening


def known_zone(value: str) -> str:
    """An IANA time zone name, or a ValueError that says what to give instead."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as Europe/Berlin)") from None
    return value


class Day(StrEnum):
    mon = "mon"
    tue = "tue"
    wed = "wed"
    thu = "thu"
    fri = "fri"
    sat = "sat"
    sun = "sun"


_WEEKDAYS = list(Day)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Window(_Strict):
    """Local hours on some days of the week; `22:00-04:00` crosses midnight and belongs to the day it opens."""

    timezone: str = Field("UTC", description="IANA time zone, e.g. Europe/Berlin.")
    hours: str = Field(description="Local opening hours, `HH:MM-HH:MM`.")
    days: list[Day] = Field(default_factory=lambda: list(Day), min_length=1, description="Days it opens on.")

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, value: str) -> str:
        return known_zone(value)

    @field_validator("hours")
    @classmethod
    def _check_hours(cls, value: str) -> str:
        match = _HOURS.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a range of hours (HH:MM-HH:MM, e.g. 01:00-05:00)")
        h1, m1, h2, m2 = (int(part) for part in match.groups())
        if not (h1 <= 23 and m1 <= 59 and (h2, m2) <= (24, 0) and m2 <= 59):
            raise ValueError(f"{value!r}: hours run from 00:00 to 24:00")
        if (h1, m1) == (h2, m2):
            raise ValueError(f"{value!r}: a window must not open and close at the same time")
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def span(self) -> tuple[timedelta, timedelta]:
        """Opening and closing as offsets from the local midnight of the opening day."""
        h1, m1, h2, m2 = (int(part) for part in _HOURS.match(self.hours).groups())  # type: ignore[union-attr]
        opens, closes = timedelta(hours=h1, minutes=m1), timedelta(hours=h2, minutes=m2)
        return opens, closes if closes > opens else closes + timedelta(days=1)

    def describe(self) -> str:
        days = "" if len(self.days) == 7 else " " + ",".join(self.days)
        return f"{self.hours} {self.timezone}{days}"

    def _interval(self, day: date) -> tuple[datetime, datetime]:
        """The window opening on local `day`, in UTC (wall-clock hours, so DST moves it with the clock)."""
        opens, closes = self.span
        midnight = datetime.combine(day, time(0), tzinfo=self.zone)
        return _wall(midnight, opens), _wall(midnight, closes)

    def occurrences(self, at: datetime) -> Iterator[tuple[date, datetime, datetime]]:
        """The openings from the day before `at` (it may still be open) onwards, as (local day, opens, closes)."""
        start = at.astimezone(self.zone).date() - timedelta(days=1)
        allowed = {_WEEKDAYS.index(day) for day in self.days}
        for day in (start + timedelta(days=n) for n in range(LOOKAHEAD_DAYS)):
            if day.weekday() in allowed:
                yield day, *self._interval(day)


def _wall(midnight: datetime, offset: timedelta) -> datetime:
    """Local midnight plus a wall-clock offset, in UTC: 02:30 on a DST change day is 02:30 on the clock."""
    local = (midnight.replace(tzinfo=None) + offset).replace(tzinfo=midnight.tzinfo)
    return local.astimezone(UTC)


class Blackout(_Strict):
    """Dates (inclusive, in each site's window time zone) when nothing is touched, for everyone or some."""

    from_: date = Field(alias="from", description="First day of the blackout.")
    to: date = Field(description="Last day of the blackout (inclusive).")
    reason: str = Field(min_length=1, description="Shown on every deferred site.")
    clients: list[str] | None = Field(None, description="Only these clients' sites; empty means every site.")
    tags: list[str] | None = Field(None, description="Only sites with one of these tags.")

    @model_validator(mode="after")
    def _ordered(self) -> Blackout:
        if self.to < self.from_:
            raise ValueError(f"`to` ({self.to}) is before `from` ({self.from_})")
        return self

    def covers(self, day: date, tags: list[str], client: str | None) -> bool:
        if not self.from_ <= day <= self.to:
            return False
        if self.clients is not None and (client or "").lower() not in {name.lower() for name in self.clients}:
            return False
        return self.tags is None or bool({t.lower() for t in self.tags} & {t.lower() for t in tags})


class Windows(_Strict):
    """The default window, and windows per tag (the first tag of a site that has one) and per client."""

    default: Window | None = Field(None, description="Window of sites with no client or tag window; none = any time.")
    tags: dict[str, Window] = Field(default_factory=dict)
    clients: dict[str, Window] = Field(default_factory=dict)

    def for_site(self, tags: list[str], client: str | None) -> Window | None:
        """The client's window, else the first of the policy's tag windows the site has, else the default."""
        if client is not None:
            for name, window in self.clients.items():
                if name.lower() == client.lower():
                    return window
        site_tags = {tag.lower() for tag in tags}
        for name, window in self.tags.items():
            if name.lower() in site_tags:
                return window
        return self.default


class Deferral(BaseModel):
    """Why a site is not touched now, and when it may be."""

    reason: str
    opens_at: datetime | None = None  # the next opening that is not blacked out (None: not within a year)
    timezone: str = "UTC"  # the window's, to say the opening in the client's own time
    blackout: bool = False  # a blackout, not a closed window: nothing goes past it, a security fix neither

    @property
    def explained(self) -> str:
        """The reason and the next opening in the window's own time, as the report shows it."""
        if self.opens_at is None:
            return f"{self.reason}; no window opens within {LOOKAHEAD_DAYS} days"
        local = self.opens_at.astimezone(ZoneInfo(self.timezone))
        return f"{self.reason}; next window opens {local:%a %d %b %Y %H:%M} {local.tzname()}"


class Availability(BaseModel):
    """A site's answer at one moment: open until `closes_at` (its window opened on local `day`), or deferred. An
    open window also says when the next one opens (`then`), for a site it already served today."""

    open: bool
    deferral: Deferral | None = None
    closes_at: datetime | None = None  # None when open: the site has no window (any time outside a blackout)
    day: date | None = None
    then: Deferral | None = None  # an open window's site that is done for this window: when the next one opens


def availability(
    windows: Windows | None, blackouts: list[Blackout], tags: list[str], client: str | None, at: datetime
) -> Availability:
    """May this site be touched at `at` (an aware moment)? With no windows, any time outside a blackout."""
    window = windows.for_site(tags, client) if windows is not None else None
    zone = window.zone if window is not None else UTC

    def blackout(day: date) -> Blackout | None:
        return next((b for b in blackouts if b.covers(day, tags, client)), None)

    if window is None:
        today = at.astimezone(zone).date()
        hit = blackout(today)
        if hit is None:
            return Availability(open=True, day=today)
        day = today
        while blackout(day) is not None and (day - today).days < LOOKAHEAD_DAYS:
            day += timedelta(days=1)
        opens = datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)
        return Availability(open=False, deferral=Deferral(reason=f"blackout: {hit.reason}", opens_at=opens,
                                                                 blackout=True))
    current = None
    for day, opens, closes in window.occurrences(at):
        if opens > at:
            break
        if at < closes:
            current = day, opens, closes
            break
    if current is not None:
        hit = blackout(current[0])
        if hit is None:
            after = next((opens for day, opens, _ in window.occurrences(at) if day > current[0]
                          and blackout(day) is None), None)
            local = current[1].astimezone(window.zone)
            done = Deferral(reason=f"already maintained in this window (it opened {local:%a %d %b %Y %H:%M} "
                            f"{local.tzname()}; once per window)", opens_at=after, timezone=window.timezone)
            return Availability(open=True, closes_at=current[2], day=current[0], then=done)
        reason = f"blackout: {hit.reason}"
    else:
        reason = f"outside its maintenance window ({window.describe()})"
    upcoming = next(
        (opens for day, opens, _ in window.occurrences(at) if opens > at and blackout(day) is None), None
    )
    return Availability(open=False, deferral=Deferral(reason=reason, opens_at=upcoming, timezone=window.timezone))


class PlacedSite(Protocol):
    """What placing a site in its window reads of it (the plan's site record is one)."""

    id: int
    client: str | None
    tags: list[str]

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self: ...


SiteT = TypeVar("SiteT", bound=PlacedSite)


def place_in_windows(
    sites: list[SiteT], windows: Windows | None, blackouts: list[Blackout], at: datetime,
    maintained: dict[int, date] | None = None,
) -> tuple[list[SiteT], dict[int, date]]:
    """Each site with its deferral (outside its window, in a blackout, or already maintained in this window) or
    the moment its window closes; and the window day of each site with a window that may be touched now. Once per
    window is a rule of windows: a site without one may be worked on any time, by every run."""
    answers: dict[tuple[str | None, tuple[str, ...]], Availability] = {}
    placed, days = [], {}
    for site in sites:
        key = (site.client, tuple(sorted(tag.lower() for tag in site.tags)))
        if key not in answers:  # most sites share a client and tags: one answer each
            answers[key] = availability(windows, blackouts, site.tags, site.client, at)
        answer = answers[key]
        if answer.open and answer.then is not None and maintained and maintained.get(site.id) == answer.day:
            placed.append(site.model_copy(update={"deferral": answer.then}))
        elif answer.open:
            placed.append(site.model_copy(update={"window_closes_at": answer.closes_at}))
            if answer.then is not None:
                days[site.id] = answer.day
        else:
            placed.append(site.model_copy(update={"deferral": answer.deferral}))
    return placed, days
