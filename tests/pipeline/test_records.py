"""Records (one per item or site) share one set of field names, and behave as ordinary models otherwise."""

from __future__ import annotations

from fleet.model.summary import Item, Outcome, UpdateType
from fleet.rules.plan import Decision, PlanItem


def item(slug: str) -> PlanItem:
    return PlanItem(site_id=1, type=UpdateType.plugin, slug=slug, name=slug, from_version="1.0", to_version="1.1",
                    decision=Decision.apply)


def test_records_share_their_field_names_and_keep_their_own_values():
    first, second = item("a"), item("b")
    assert first.model_fields_set is second.model_fields_set  # one set for every PlanItem, not one each
    first.decision, first.reason = Decision.held, "freeze"
    assert (second.decision, second.reason) == (Decision.apply, None)
    assert PlanItem.model_validate_json(first.model_dump_json()) == first
    assert first.model_fields_set == set(PlanItem.model_fields)


def test_a_copy_with_changes_is_independent():
    done = Item(site_id=1, site_url="https://a.example/", site_name="A", type=UpdateType.core, slug="wordpress",
                name="WordPress", outcome=Outcome.updated)
    failed = done.model_copy(update={"outcome": Outcome.failed, "reason": "boom"})
    assert (done.outcome, done.reason) == (Outcome.updated, None)
    assert (failed.outcome, failed.reason) == (Outcome.failed, "boom")
