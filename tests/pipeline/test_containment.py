"""Tonight's breaks, without Prefect: which sites broke after a step, and what is then not sent."""

from __future__ import annotations

from fleet.engine.containment import TonightsBreaks, newly_broken
from fleet.engine.site_probe import ProbeResult
from fleet.model.summary import UpdateType
from fleet.rules.plan import Decision, PlanItem

OK, DOWN = ProbeResult(ok=True, http_code=200), ProbeResult(ok=False, http_code=500, error="HTTP 500")


def item(site_id: int, slug: str, to_version: str, type_: UpdateType = UpdateType.plugin) -> PlanItem:
    return PlanItem(site_id=site_id, type=type_, slug=slug, name=slug, from_version="1.0", to_version=to_version,
                    decision=Decision.apply)


def test_only_a_site_that_passed_before_and_fails_now_broke_tonight() -> None:
    before = {1: OK, 2: DOWN, 3: OK}
    assert newly_broken(before, {1: DOWN, 2: DOWN, 3: OK, 4: DOWN}) == {1}  # 2 was down, 4 never probed before


def test_a_broken_site_gets_nothing_more_and_its_versions_go_nowhere_else_tonight() -> None:
    breaks = TonightsBreaks()
    breaks.learn(1, "Shop", "plugin", [item(1, "forms", "2.0"), item(1, "cache", "")])
    assert "nothing more was sent" in breaks.why_not_sent(item(1, "astra", "4.0", UpdateType.theme))
    assert breaks.why_not_sent(item(2, "forms", "2.0")) == "held tonight: version 2.0 broke Shop earlier in this night"
    assert breaks.why_not_sent(item(2, "forms", "2.1")) is None  # another version of it is not the bad one
    assert breaks.why_not_sent(item(2, "cache", "")) is None  # a version not known is never matched


def test_with_its_culprit_found_only_the_culprits_version_goes_nowhere_else_tonight() -> None:
    from fleet.model.summary import Containment, ContainmentStatus, Suspect

    breaks = TonightsBreaks()
    applied = [item(1, "forms", "2.0"), item(1, "seo", "3.1"), item(1, "cache", "1.5")]
    culprit = Suspect(type=UpdateType.plugin, slug="seo", name="seo", from_version="1.0", to_version="3.1")
    breaks.learn_break(1, "Shop", Containment(step=UpdateType.plugin, status=ContainmentStatus.contained,
                                              culprit=culprit, rounds=2), applied)
    assert breaks.why_not_sent(item(2, "seo", "3.1")) == "held tonight: version 3.1 broke Shop earlier in this night"
    assert breaks.why_not_sent(item(2, "forms", "2.0")) is None and breaks.why_not_sent(item(2, "cache", "1.5")) is None
    assert "nothing more was sent" in breaks.why_not_sent(item(1, "astra", "4.0", UpdateType.theme))
    assert breaks.containments[1].culprit.slug == "seo"

    unknown = TonightsBreaks()  # no culprit (not contained, or a dead child): every applied version is kept back
    unknown.learn_break(1, "Shop", Containment(step=UpdateType.plugin, status=ContainmentStatus.unreachable), applied)
    assert all(unknown.why_not_sent(item(2, i.slug, i.to_version)) for i in applied)
