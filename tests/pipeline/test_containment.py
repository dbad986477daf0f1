"""Tonight's breaks, without Prefect: which sites broke after a step, and what is then not sent."""

from __future__ import annotations

from fleet.engine.containment import TonightsBreaks, newly_broken
from fleet.engine.site_probe import ProbeResult
from fleet.model.summary import Band, PageLook, SiteLook, UpdateType
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


def review_look(site_id: int, name: str) -> SiteLook:
    page = PageLook(page="home", viewport="desktop", url="https://shop.example/", band=Band.review, score=0.021,
                    before="visual/1/desktop/home.before.png", after="visual/1/desktop/home.after-plugin.png",
                    diff="visual/1/desktop/home.after-plugin.diff.png")
    return SiteLook(site_id=site_id, site_url="https://shop.example/", site_name=name, band=Band.review,
                    step=UpdateType.plugin, pages=[page])


def test_a_version_that_changed_a_sites_look_waits_at_the_gate_until_a_person_approves_it() -> None:
    breaks = TonightsBreaks()
    breaks.learn_review(review_look(1, "Shop"), [item(1, "slider", "5.0"), item(1, "cache", "")])
    later = [item(2, "slider", "5.0"), item(2, "slider-pro", "5.0"), item(3, "slider", "5.1"), item(2, "cache", "")]
    step = breaks.withhold(later, {2: ["hello.php"]})
    assert [(i.site_id, i.slug) for i in step.sent] == [(2, "slider-pro"), (3, "slider"), (2, "cache")]
    assert step.gated == {(2, UpdateType.plugin, "slider")} and not step.held
    assert step.untouchable == {2: ["hello.php", "slider"]}  # a call naming site 2 must leave it alone
    gated = later[0]
    assert gated.decision is Decision.awaiting_approval
    assert gated.reason == ("version 5.0 changed how Shop looks: looks different, for review: 2.1% of home (desktop) "
                            "changed (see visual/1/desktop/home.after-plugin.diff.png)")
    gated.decision, gated.approved_by = Decision.apply, "Ada"  # the gate's answer: its pass sends it
    assert breaks.withhold([gated], {}).sent == [gated]
    by_policy = item(4, "slider", "5.0").model_copy(update={"decision": Decision.awaiting_approval,
                                                             "reason": "a major version"})
    breaks.tell_reviews([by_policy, item(5, "forms", "1.1")])  # the approver hears of the review too
    assert by_policy.reason.startswith("a major version; version 5.0 changed how Shop looks")
