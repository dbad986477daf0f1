"""Finding the culprit by bisection, without Prefect or HTTP: a site modelled as its active plugins and the ones
whose code breaks the home page."""

from __future__ import annotations

import pytest

from fleet.engine.culprit import ChildUnreachable, bisect, contain_site
from fleet.model.summary import ContainmentStatus, UpdateType
from fleet.rules.plan import Decision, PlanItem
from fleet.rules.policy import Policy


class ModelSite:
    """A site: a plugin in `bad` breaks the home page while active; `dead` is a child that answers nothing."""

    def __init__(self, active: set[str], bad: set[str], dead: bool = False) -> None:
        self.active, self.bad, self.dead = set(active), bad, dead
        self.switches: list[tuple[str, tuple[str, ...]]] = []
        self.synced = 0

    async def active_plugins(self) -> set[str]:
        return set(self.active)

    async def deactivate(self, slugs: list[str]) -> None:
        self._switch("off", slugs)
        self.active -= set(slugs)

    async def activate(self, slugs: list[str]) -> None:
        self._switch("on", slugs)
        self.active |= set(slugs)

    def _switch(self, verb: str, slugs: list[str]) -> None:
        if self.dead:
            raise ChildUnreachable("Site is known to be offline")
        self.switches.append((verb, tuple(slugs)))

    async def home_page_ok(self) -> bool:
        return not (self.active & self.bad) and not self.dead

    async def child_unreachable(self) -> str | None:
        self.synced += 1
        return "Site is known to be offline" if self.dead else None


def plugin(slug: str) -> PlanItem:
    return PlanItem(site_id=1, type=UpdateType.plugin, slug=slug, name=slug.title(), from_version="1.0",
                    to_version="1.1", decision=Decision.apply)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13])
async def test_the_one_bad_plugin_is_found_wherever_it_is_and_left_alone_deactivated(count: int) -> None:
    slugs = [f"p{n}" for n in range(count)]
    for bad in slugs:
        site = ModelSite(set(slugs) | {"other"}, {bad})
        found = await bisect(slugs, site)
        assert found.culprit == bad
        assert site.active == (set(slugs) - {bad}) | {"other"}  # the innocent ones are active again
        assert found.rounds <= (count - 1).bit_length() + 1
        assert await site.home_page_ok()


async def test_no_single_plugin_to_blame_leaves_every_plugin_as_it_was() -> None:
    slugs = ["a", "b", "c", "d"]
    site = ModelSite(set(slugs), {"a", "c"})  # two bad ones: no one plugin brings the site back
    found = await bisect(slugs, site)
    assert found.culprit is None and found.rounds >= 2
    assert site.active == set(slugs)
    site = ModelSite(set(slugs) | {"theme-glue"}, {"theme-glue"})  # the culprit is not among them
    assert (await bisect(slugs, site)).culprit is None and site.active == set(slugs) | {"theme-glue"}


async def test_contained_names_the_culprit_and_how_many_rounds() -> None:
    applied = [plugin("forms"), plugin("cache"), plugin("seo")]
    site = ModelSite({"forms", "cache", "seo"}, {"seo"})
    contained = await contain_site(UpdateType.plugin, applied, Policy(), site)
    assert contained.status is ContainmentStatus.contained and contained.culprit.slug == "seo"
    assert contained.headline == "broken, then contained: Seo deactivated"
    assert contained.rounds == 3 and "1.0" in contained.next_steps
    assert site.active == {"forms", "cache"}


async def test_the_policy_can_forbid_deactivation_or_ask_for_a_report_only() -> None:
    applied = [plugin("woocommerce/woocommerce.php"), plugin("cache")]
    site = ModelSite({"woocommerce/woocommerce.php", "cache"}, {"woocommerce/woocommerce.php"})
    guarded = Policy(never_deactivate=["woocommerce"])
    result = await contain_site(UpdateType.plugin, applied, guarded, site)
    assert result.status is ContainmentStatus.not_contained and "Woocommerce/Woocommerce.Php" in result.detail
    assert ("off", ("woocommerce/woocommerce.php",)) not in site.switches
    assert site.active == {"woocommerce/woocommerce.php", "cache"}

    site = ModelSite({"cache"}, {"cache"})
    result = await contain_site(UpdateType.plugin, [plugin("cache")], Policy(contain="report"), site)
    assert result.status is ContainmentStatus.reported and not site.switches and site.synced == 1


async def test_a_theme_step_is_not_bisected_and_a_dead_child_is_unreachable_with_what_to_do() -> None:
    theme = PlanItem(site_id=1, type=UpdateType.theme, slug="astra", name="Astra", from_version="4.0",
                     to_version="4.1", decision=Decision.apply)
    site = ModelSite(set(), set())
    result = await contain_site(UpdateType.theme, [theme], Policy(), site)
    assert result.status is ContainmentStatus.not_plugins and "only plugins" in result.detail
    assert "wp-content/themes/astra" in result.next_steps

    dead = ModelSite({"forms/forms.php"}, {"forms/forms.php"}, dead=True)
    result = await contain_site(UpdateType.plugin, [plugin("forms/forms.php")], Policy(), dead)
    assert result.status is ContainmentStatus.unreachable
    assert result.headline == "down, unreachable by the dashboard"
    assert "rename wp-content/plugins/forms" in result.next_steps and "restore version 1.0" in result.next_steps


def test_never_deactivate_is_validated_and_matches_a_slug_or_its_folder() -> None:
    policy = Policy(never_deactivate=["woocommerce", "jetpack/jetpack.php"])
    assert not policy.may_deactivate("woocommerce/woocommerce.php")
    assert not policy.may_deactivate("jetpack/jetpack.php") and policy.may_deactivate("jetpack-boost/boost.php")
    with pytest.raises(ValueError, match="must not be empty"):
        Policy(never_deactivate=[" "])
    with pytest.raises(ValueError, match="contain"):
        Policy(contain="rollback")


def test_the_failed_runs_message_says_where_each_site_is_what_broke_it_and_what_to_do() -> None:
    """The end-of-night alert quotes this line: a site's address, the version to restore, the folder to rename and
    its dashboard page are in it, not only in summary.json."""
    from fleet.engine.culprit import unreachable
    from fleet.model.summary import Containment, SiteAlarm, Suspect
    from fleet.rules.breakage import broken_message

    culprit = Suspect(type=UpdateType.plugin, slug="seo/seo.php", name="SEO", from_version="1.0", to_version="1.1")
    contained = SiteAlarm(site_id=1, site_url="https://a.example/", site_name="Shop", saw="HTTP 500",
                          suspects=[culprit], containment=Containment(step=UpdateType.plugin, status="contained",
                                                                      culprit=culprit, rounds=2))
    down = SiteAlarm(site_id=2, site_url="https://b.example/", site_name="Blog", saw="HTTP 500", suspects=[culprit],
                     dashboard_page="https://dash.example/wp-admin/admin.php?page=managesites&dashboard=2",
                     containment=unreachable(UpdateType.plugin, [plugin("seo/seo.php")], "NOMAINWP"))
    message = broken_message([contained, down], "run-1")
    assert message.startswith("run run-1 broke 2 sites: Shop https://a.example/ (SEO 1.0 -> 1.1: broken, then "
                              "contained: SEO deactivated); ")
    assert ("; Blog https://b.example/ (SEO 1.0 -> 1.1: down, unreachable by the dashboard; on the server: rename "
            "wp-content/plugins/seo (Seo/Seo.Php), then restore version 1.0;") in message
    assert message.endswith("; dashboard: https://dash.example/wp-admin/admin.php?page=managesites&dashboard=2)")
    assert "\n" not in message


def test_suspects_are_the_items_applied_by_the_step_that_broke_the_site() -> None:
    from fleet.model.summary import Containment, ContainmentStatus, HealthCheck, Item, Outcome
    from fleet.rules.breakage import judge_sites

    def row(type_: UpdateType, slug: str, outcome: Outcome) -> Item:
        return Item(site_id=1, site_url="https://shop.example/", site_name="Shop", type=type_, slug=slug, name=slug,
                    from_version="1.0", to_version="2.0", outcome=outcome)

    items = [row(UpdateType.translation, "de_DE", Outcome.updated), row(UpdateType.plugin, "forms", Outcome.updated),
             row(UpdateType.plugin, "seo", Outcome.unknown), row(UpdateType.plugin, "cache", Outcome.failed),
             row(UpdateType.plugin, "blocks", Outcome.unchanged)]
    sites = [(1, "https://shop.example/", "Shop", None)]
    checks = {1: HealthCheck(before_ok=True, probe_ok=False, probe_error="HTTP 500", online=True)}
    after_the_night, _ = judge_sites(items, sites, checks, None)
    contained = {1: Containment(step=UpdateType.plugin, status=ContainmentStatus.not_contained)}
    after_a_step, _ = judge_sites(items, sites, checks, None, contained)
    # failed and unchanged items were never applied; the translations passed their own probe before the plugins
    assert [s.slug for s in after_the_night[0].suspects] == ["de_DE", "forms", "seo"]
    assert [s.slug for s in after_a_step[0].suspects] == ["forms", "seo"]
    only_failed, _ = judge_sites(items[3:], sites, checks, None)  # still broken by the night: a failed upgrade
    assert [s.slug for s in only_failed[0].suspects] == ["cache", "blocks"]
