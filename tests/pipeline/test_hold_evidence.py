"""Holds kept by evidence, without Prefect: what ends a hold (no open incident names it and whole-fleet nights on
the policy's days saw it offered nowhere), what does not (a quiet night over a selection, a window or failed syncs;
many nights on one day), and the suspects tried on one site alone."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from fleet.model.summary import HoldKind, NightHold, UpdateType
from fleet.rules.holds import Evidence, hold_remembered, pick_canaries
from fleet.rules.plan import Decision, PlanItem
from fleet.state.holds import HoldStore

DAY = date(2026, 11, 2)
KEY = (UpdateType.plugin, "lab-canary/lab-canary.php", "1.3")


def store_with(tmp_path: Path, kind: HoldKind = HoldKind.culprit, site: str = "https://one.example/") -> HoldStore:
    store = HoldStore(tmp_path / "state.sqlite")
    store.remember([NightHold(type=KEY[0], slug=KEY[1], version=KEY[2], reason="broke one", site=site, since=DAY,
                              kind=kind)])
    return store


def evidence(day: int, *, offered: bool = False, whole_fleet: bool = True, named: bool = False,
             needed: int = 3) -> Evidence:
    return Evidence(offered=frozenset({KEY} if offered else ()), whole_fleet=whole_fleet,
                    named={KEY: [1]} if named else {}, culprits=frozenset(), cleared=frozenset(),
                    quiet_days_needed=needed, today=DAY + timedelta(days=day))


def test_a_hold_ends_only_after_the_policys_days_of_whole_fleet_nights_that_saw_it_offered_nowhere(tmp_path):
    store = store_with(tmp_path)
    assert store.weigh(evidence(1)) == [] and store.weigh(evidence(1)) == []  # one day, however many nights
    assert store.weigh(evidence(2, whole_fleet=False)) == []  # a selection, a window, a failed sync: not counted
    [hold] = store.active()
    assert hold.quiet_days == 1 and "2 more days" in hold.ends
    assert store.weigh(evidence(3)) == []
    [ended] = store.weigh(evidence(4))
    assert (ended.slug, ended.version) == KEY[1:] and store.active() == []


def test_an_offer_anywhere_starts_the_days_over_and_an_open_incident_keeps_it(tmp_path):
    store = store_with(tmp_path)
    store.weigh(evidence(1))
    store.weigh(evidence(2))
    store.weigh(evidence(3, offered=True, whole_fleet=False))  # a lagging site offered it, on a partial night
    [hold] = store.active()
    assert (hold.quiet_days, hold.last_offered) == (0, DAY + timedelta(days=3))
    for day in (4, 5, 6, 7):
        assert store.weigh(evidence(day, named=True)) == []  # incident 1 still names it
    assert "incident 1" in store.active()[0].ends
    assert store.weigh(evidence(8)) != []


def test_a_suspect_is_tried_on_one_site_once_its_breaks_culprit_is_known(tmp_path):
    store = store_with(tmp_path, HoldKind.suspect)
    [hold] = store.active()
    assert pick_canaries([item(1), item(2)], [hold], frozenset()) == []  # its break's culprit is not known
    [canary] = pick_canaries([item(3), item(2)], [hold], frozenset({KEY}))  # now it is, and not this one
    assert canary.site_id == 2
    [tried, spared] = hold_remembered([item(2), item(3)], [hold], [canary])
    assert (tried.decision, spared.decision) == (Decision.apply, Decision.held)
    store.weigh(Evidence(offered=frozenset({KEY}), whole_fleet=True, named={}, culprits=frozenset({KEY}),
                         cleared=frozenset(), quiet_days_needed=30, today=DAY))
    assert store.active()[0].kind is HoldKind.culprit  # an incident learned it was the culprit after all


def item(site_id: int) -> PlanItem:
    return PlanItem(site_id=site_id, type=KEY[0], slug=KEY[1], name="Lab Canary", from_version="1.2",
                    to_version=KEY[2], decision=Decision.apply)


def test_an_older_state_database_gains_the_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE night_holds (type TEXT NOT NULL, slug TEXT NOT NULL, version TEXT NOT "
                           "NULL, name TEXT NOT NULL, reason TEXT NOT NULL, site TEXT, since TEXT NOT NULL, "
                           "released TEXT, PRIMARY KEY (type, slug, version))")
        connection.execute("INSERT INTO night_holds VALUES ('plugin', 'a', '1', 'A', 'broke x', NULL, "
                           "'2026-01-01', NULL)")
    connection.close()
    [hold] = HoldStore(path).active()
    assert (hold.kind, hold.quiet_days, hold.ends) == (HoldKind.culprit, 0, "")
