"""Maintenance windows and blackouts, without Prefect: which moment is inside whose window, in its own zone."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from fleet.rules.plan import SiteRecord
from fleet.rules.policy import PolicyError, parse_policy
from fleet.rules.windows import availability, place_in_windows

POLICY = {
    "windows": {
        "default": {"timezone": "UTC", "hours": "00:00-06:00"},
        "tags": {"eu": {"timezone": "Europe/Berlin", "hours": "01:00-04:00", "days": ["mon", "tue", "wed", "thu",
                                                                                          "fri"]}},
        "clients": {"Acme Ltd": {"timezone": "America/New_York", "hours": "02:00-05:00"}},
    },
    "blackouts": [
        {"from": "2026-12-24", "to": "2026-12-26", "reason": "holidays"},
        {"from": "2026-11-27", "to": "2026-11-30", "clients": ["Acme Ltd"], "reason": "Black Friday"},
    ],
}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def answer(tags: list[str], client: str | None, moment: str):
    policy = parse_policy(POLICY)
    return availability(policy.windows, policy.blackouts, tags, client, at(moment))


def test_berlin_window_follows_the_clock_across_the_october_change() -> None:
    # 01:00-04:00 Berlin is 23:00-02:00 UTC in summer time (Friday 23 Oct) and 00:00-03:00 UTC after the change
    # (Monday 26 Oct 2026): at 02:30 UTC the window is closed on the Friday and open on the Monday.
    friday, monday = answer(["eu"], None, "2026-10-23T02:30:00"), answer(["eu"], None, "2026-10-26T02:30:00")
    assert not friday.open and friday.deferral.opens_at == at("2026-10-26T00:00:00")  # Monday 01:00 CET
    assert monday.open and monday.closes_at == at("2026-10-26T03:00:00") and monday.day == date(2026, 10, 26)
    assert answer(["eu"], None, "2026-10-22T23:30:00").open  # Friday 01:30 CEST, the day before


def test_client_window_wins_over_tag_and_default_and_its_blackout_names_the_reason() -> None:
    assert not answer(["eu"], "acme ltd", "2026-10-26T02:30:00").open  # the client's New York window, not eu's
    black_friday = answer([], "Acme Ltd", "2026-11-27T07:30:00")  # 02:30 in New York: inside, but blacked out
    assert not black_friday.open and black_friday.deferral.reason == "blackout: Black Friday"
    assert black_friday.deferral.opens_at == at("2026-12-01T07:00:00")  # 1 Dec, 02:00 EST
    assert black_friday.deferral.explained.endswith("next window opens Tue 01 Dec 2026 02:00 EST")
    assert answer([], "Other Co", "2026-11-27T03:00:00").open  # the blackout is Acme's only


def test_holiday_blackout_defers_every_site_until_a_window_after_it() -> None:
    everyone = [answer([], None, "2026-12-24T02:00:00"), answer(["eu"], None, "2026-12-25T01:00:00")]
    assert [a.deferral.reason for a in everyone] == ["blackout: holidays"] * 2
    assert everyone[0].deferral.opens_at == at("2026-12-27T00:00:00")
    assert everyone[1].deferral.opens_at == at("2026-12-28T00:00:00")  # Monday: eu's window is weekdays only


def test_a_window_across_midnight_belongs_to_the_day_it_opens() -> None:
    policy = parse_policy({"windows": {"default": {"timezone": "Australia/Sydney", "hours": "22:00-03:00"}}})
    late = availability(policy.windows, [], [], None, at("2026-11-23T15:30:00"))  # 02:30 on the 24th in Sydney
    assert late.open and late.day == date(2026, 11, 23) and late.closes_at == at("2026-11-23T16:00:00")


def test_no_windows_means_any_time_and_places_every_site() -> None:
    sites = [SiteRecord(id=1, url="https://a.example", name="A"), SiteRecord(id=2, url="https://b.example",
                                                                              name="B", client="Acme Ltd")]
    placed, days = place_in_windows(sites, None, [], at("2026-11-23T15:00:00"),
                                    maintained={1: date(2026, 11, 23), 2: date(2026, 11, 23)})
    # no window: any time, however often it was maintained today, and no window day to spend
    assert [site.deferral for site in placed] == [None, None] and days == {}


def test_a_site_maintained_in_this_window_is_deferred_to_the_next_one_saying_so() -> None:
    policy = parse_policy(POLICY)
    sites = [SiteRecord(id=1, url="https://a.example", name="A"), SiteRecord(id=2, url="https://b.example", name="B")]
    placed, days = place_in_windows(sites, policy.windows, [], at("2026-11-24T01:00:00"),
                                    maintained={1: date(2026, 11, 24), 2: date(2026, 11, 23)})
    assert placed[0].deferral.explained == ("already maintained in this window (it opened Tue 24 Nov 2026 00:00 UTC; "
                                            "once per window); next window opens Wed 25 Nov 2026 00:00 UTC")
    assert 1 not in days
    assert placed[1].deferral is None and placed[1].window_closes_at == at("2026-11-24T06:00:00")
    assert days == {2: date(2026, 11, 24)}


def test_only_the_sites_with_a_window_are_maintained_once_per_window() -> None:
    """Issue 44: a client window on one site made every later run of the day defer the others, which have no
    window, as 'already maintained ...; no window opens within 400 days'."""
    policy = parse_policy({"windows": {"clients": {"Acme Ltd": {"timezone": "UTC", "hours": "00:00-06:00"}}}})
    sites = [SiteRecord(id=1, url="https://a.example", name="A", client="Acme Ltd"),
             SiteRecord(id=2, url="https://b.example", name="B")]
    placed, days = place_in_windows(sites, policy.windows, [], at("2026-11-28T03:00:00"),
                                    maintained={1: date(2026, 11, 28), 2: date(2026, 11, 28)})
    assert placed[0].deferral is not None and placed[0].deferral.opens_at == at("2026-11-29T00:00:00")
    assert placed[1].deferral is None and days == {}


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"windows": {"default": {"timezone": "Mars/Olympus", "hours": "01:00-02:00"}}}, "windows.default.timezone",
     "unknown time zone"),
    ({"windows": {"tags": {"eu": {"hours": "25:00-02:00"}}}}, "windows.tags.eu.hours", "hours run from"),
    ({"windows": {"default": {"hours": "1am to 4am"}}}, "windows.default.hours", "is not a range of hours"),
    ({"windows": {"default": {"hours": "01:00-02:00", "days": ["someday"]}}}, "windows.default.days.0", "Input"),
    ({"blackouts": [{"from": "2026-12-26", "to": "2026-12-24", "reason": "x"}]}, "blackouts.0", "is before"),
    ({"approval": {"timeout": "soon"}}, "approval.timeout", "Input"),
])
def test_a_bad_window_or_blackout_names_the_field(change: dict, field: str, message: str) -> None:
    with pytest.raises(PolicyError, match=rf"{field}: .*{message}"):
        parse_policy(change)


def test_fleet_approve_names_items_as_the_policy_does() -> None:
    from cli.commands.approve import chosen_rows

    rows = [{"site": "7 granite.example", "item": "plugin:woocommerce/woocommerce.php", "approve": False},
            {"site": "9 shop.example", "item": "theme:astra", "approve": False}]
    ticked = chosen_rows([dict(row) for row in rows], False, ["7:woocommerce", "shop.example:theme:astra"])
    assert [row["approve"] for row in ticked] == [True, True]
    assert [row["approve"] for row in chosen_rows([dict(row) for row in rows], False, ["9:astra"])] == [False, True]
    with pytest.raises(ValueError, match=r"not waiting for approval: 7:astra \(waiting: 7:plugin:woo"):
        chosen_rows([dict(row) for row in rows], False, ["7:astra"])
    with pytest.raises(ValueError, match="give SITE:ITEM"):
        chosen_rows(rows, False, ["woocommerce"])
