"""What a report says about items not updated: grouped across sites for the operator, in plain words with what
happens next for a client, ignored and excluded items as one sentence for a client, one and many in every count."""

from __future__ import annotations

from fleet.model.summary import Item, Outcome, UpdateType
from fleet.model.vocabulary import NOT_INSTALLED, client_voice, operator_voice
from reporting.aggregate import alarms, items_frame, left_out_sentence, not_done
from reporting.model import Headline, NotDoneRow
from reporting.rows import ItemRow
from reporting.run_report import OPERATOR, RenderedRun
from tests.reporting.conftest import body

CODE = "Download failed. [mainwp_update_failed]"


def item(site: int, slug: str, outcome: Outcome, reason: str | None = None, to_version: str = "2.0") -> ItemRow:
    return ItemRow(site_id=site, site_url=f"https://s{site}.example", site_name=f"Site {site}", type=UpdateType.plugin,
                   slug=slug, name=slug.title(), outcome=outcome, from_version="1.0", to_version=to_version,
                   reason=reason)


def test_the_operator_reads_one_row_per_item_outcome_and_reason_with_its_sites_named() -> None:
    frame = items_frame([item(site, "hello", Outcome.ignored, "on the dashboard's ignore list") for site in range(1, 8)]
                        + [item(1, "forms", Outcome.failed, CODE), item(2, "forms", Outcome.failed, CODE),
                           item(3, "forms", Outcome.failed, "Could not copy file")])
    voice = operator_voice()
    groups = {group.term: group for group in not_done(frame, 10, voice)}
    ignored = groups[voice.term(Outcome.ignored)]
    assert (ignored.total, len(ignored.rows.shown), ignored.rows.more) == (7, 1, 0)
    assert ignored.rows.shown[0].site_names == "Site 1, Site 2, Site 3 and 4 more sites"
    failed = groups[voice.term(Outcome.failed)]
    assert failed.total == 3 and [(row.why, row.sites) for row in failed.rows] == [
        (CODE, ["Site 1", "Site 2"]), ("Could not copy file", ["Site 3"])]  # the operator keeps the error code


def test_a_row_names_one_two_or_a_few_sites_plainly() -> None:
    def row(sites: int) -> NotDoneRow:
        return NotDoneRow([f"s{n}" for n in range(sites)], UpdateType.plugin, "x", "1", "2", "", None)

    assert [row(n).site_names for n in (1, 2, 3, 4)] == [
        "s0", "s0 and s1", "s0, s1 and s2", "s0, s1, s2 and 1 more site"]


def test_a_client_reads_what_happens_next_with_no_error_code() -> None:
    frame = items_frame([item(1, "forms", Outcome.failed, CODE), item(2, "shop", Outcome.failed, CODE),
                         item(3, "cache", Outcome.unknown, "HTTP 504: Gateway Time-out")])
    held = {("plugin", "shop", "2.0"): "it broke a site on the first night"}
    groups = not_done(frame, 10, client_voice(), client=True, held=held)
    assert [(group.term, group.total) for group in groups] == [(NOT_INSTALLED, 3)]  # one word for all three
    whys = {row.name: row.why for group in groups for row in group.rows}
    assert whys["Forms"] == "Not installed: it will be tried again next night."
    assert "held back on every site" in whys["Shop"] and "it broke a site on the first night" in whys["Shop"]
    assert "next night" in whys["Cache"]
    assert not any("mainwp_" in why or "504" in why or "rule:" in why for why in whys.values())


def test_a_client_reads_ignored_and_excluded_items_as_one_sentence() -> None:
    frame = items_frame([item(1, "hello", Outcome.ignored), item(2, "hello", Outcome.ignored),
                         item(2, "akismet", Outcome.excluded), item(3, "forms", Outcome.held, "frozen")])
    voice = client_voice()
    assert [group.term for group in not_done(frame, 10, voice, client=True)] == [voice.term(Outcome.held)]
    assert left_out_sentence(frame) == ("Left out on purpose 3 (on 2 sites): kept back by agreement or by our "
                                        "maintenance policy.")
    assert left_out_sentence(items_frame([item(1, "hello", Outcome.ignored)])).startswith("Left out on purpose 1 "
                                                                                          "(on 1 site)")
    assert left_out_sentence(items_frame([item(1, "forms", Outcome.held)])) == ""


def test_one_and_many_are_written_right() -> None:
    def headline(**values: int) -> Headline:
        counts = {outcome: 0 for outcome in Outcome} | {Outcome.updated: values.pop("updated", 0),
                                                        Outcome.held: values.pop("held", 0)}
        return Headline(voice=operator_voice(), by_outcome=counts, open_incidents=0, **values)

    one = headline(sites=1, sites_updated=1, items=1, updated=1, checked=1, healthy=1)
    assert one.health == "The checked site is healthy."
    assert one.sentence == "Updated 1 of 1 item on 1 site."
    assert headline(sites=1, sites_updated=0, items=0, checked=0, healthy=0).sentence.startswith("The site was up")
    many = headline(sites=9, sites_updated=2, items=5, updated=2, held=3, checked=3, healthy=2)
    assert many.health == "1 of 3 checked sites needs attention."
    assert many.sentence == "Updated 2 of 5 items on 2 sites; not updated 3 (see why below): held 3."
    none = headline(sites=2, sites_updated=0, items=3, held=3, checked=0, healthy=0)
    assert none.sentence == "Updated 0 of 3 items; not updated 3 (see why below): held 3."


def test_rendered_client_reports_carry_no_error_text_and_no_ignored_rows(rendered: RenderedRun) -> None:
    operator = body(rendered, rendered.operator, ".html")
    assert "cURL error 28" in operator or "PHP Fatal error" in operator or "Could not copy file" in operator
    for report in rendered.reports:
        if report.name == OPERATOR:
            continue
        for suffix in (".html", ".txt", ".md"):
            text = body(rendered, report, suffix)
            assert not any(words in text for words in ("cURL error", "PHP Fatal", "Could not copy file",
                                                       "global ignore list", "rule:")), (report.name, suffix)
            assert 'data-row="ignored"' not in text and 'data-row="excluded"' not in text


def test_the_sentence_about_holds_is_made_from_the_holds_stored() -> None:
    from datetime import date

    from fleet.model.summary import NightHold, SiteAlarm, Suspect

    alarm = SiteAlarm(site_id=1, site_url="https://a.example/", site_name="A", client=None, saw="HTTP 500",
                      suspects=[Suspect(type=UpdateType.plugin, slug="forms", name="Forms", from_version="1.0",
                                        to_version="1.2", outcome=Outcome.updated)])
    hold = NightHold(type=UpdateType.plugin, slug="forms", name="Forms", version="1.2", reason="broke A",
                     since=date(2026, 11, 24))
    [stored] = alarms([alarm], None, [hold])
    [none] = alarms([alarm], None, [])
    [other] = alarms([alarm], None, [hold.model_copy(update={"version": "1.1"})])
    assert stored.holds_sentence == "held fleet-wide from the next night: Forms 1.2 (fleet holds list)"
    assert none.holds_sentence == other.holds_sentence == ("nothing is held because of it (no suspect was shown "
                                                           "applied)")


def test_a_client_reads_held_and_skipped_items_without_another_clients_site_or_an_error(tmp_path) -> None:
    """Holds made the way a night makes them (`bad_versions`), a disconnected site's items skipped with the
    dashboard's error: the client's report says what happens next; the operator's keeps the evidence."""
    from datetime import date

    from fleet.model.summary import SiteAlarm, Suspect
    from fleet.rules.holds import bad_versions
    from reporting.run_report import render_reports
    from tests.reporting.builder import build_summary

    night = date(2026, 3, 9)
    summary = build_summary(night, xss_probe=False)
    sites = {site.site_name: site for site in summary.sites}
    error = "Download failed. cURL error 28: Operation timed out [mainwp_update_failed]"
    others = [site for site in summary.sites if site.client not in ("Acme Dental", None)][:3]
    summary.items += [Item(site_id=site.site_id, site_url=site.site_url, site_name=site.site_name,
                           client=site.client, type=UpdateType.plugin, slug="shop", name="Shop", from_version="1.0",
                           to_version="2.0", outcome=Outcome.failed, reason=error) for site in others]
    broke = sites["Northwind Shop"]
    summary.broken = [SiteAlarm(site_id=broke.site_id, site_url=broke.site_url, site_name=broke.site_name,
                                client=broke.client, saw="HTTP 500 on the home page", suspects=[Suspect(
                                    type=UpdateType.plugin, slug="forms", name="Forms", from_version="1.0",
                                    to_version="1.2", outcome=Outcome.updated)])]
    summary.holds = bad_versions(summary, 3, night)
    holds = {hold.slug: hold for hold in summary.holds}
    assert set(holds) == {"shop", "forms"}
    dental, booking = sites["Acme Dental"], sites["Acme Dental Booking"]
    booking.status = "disconnected"

    def acme(site, slug: str, outcome: Outcome, reason: str, rule: str | None = None) -> Item:
        return Item(site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client="Acme Dental",
                    type=UpdateType.plugin, slug=slug, name=slug.title(), from_version="1.0",
                    to_version="2.0" if slug == "shop" else "1.2", outcome=outcome, reason=reason, rule=rule)

    summary.items = [item for item in summary.items if item.site_id != booking.site_id] + [
        acme(dental, "shop", Outcome.held, f"held since {night}: {holds['shop'].reason}", "night_hold"),
        acme(dental, "forms", Outcome.failed, error),
        acme(booking, "cache", Outcome.skipped, "sync failed: ERROR: HTTP error: cURL error 7: Failed to connect "
             "to the child site. [mainwp_sync_failed]", "site_status")]
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    client = next(report for report in rendered.reports if report.name == "Acme Dental")
    text = body(rendered, client, ".txt")
    assert ("Held back on every site we maintain: it failed to install on 3 sites on 09 Mar 2026. We will install "
            "the next release once it is out.") in text
    assert ("Not installed. This version is held back on every site we maintain (it broke a website it was "
            "installed on, on 09 Mar 2026); we will install the next release once it is out.") in text
    assert "The site could not be reached: its updates are tried again next night." in text
    for suffix in (".txt", ".html", ".md"):
        shown = body(rendered, client, suffix)
        assert not any(words in shown for words in ("cURL", "mainwp_", "HTTP 500", "Northwind", "Birch", "Orchard",
                                                    "night_hold", "fleet holds")), suffix
    operator = body(rendered, rendered.operator, ".txt")
    assert "[mainwp_sync_failed]" in operator and "failed on 3 sites: Download failed" in operator


def test_a_report_with_no_site_checked_says_so_rather_than_0_of_0(tmp_path) -> None:
    from datetime import date

    from reporting.run_report import render_reports
    from tests.reporting.builder import build_summary

    summary = build_summary(date(2026, 3, 9), xss_probe=False)
    birch = {site.site_id for site in summary.sites if site.client == "Birch & Co Architects"}
    summary.sites = [site.model_copy(update={"status": "offline", "check": None}) if site.site_id in birch else site
                     for site in summary.sites]
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    client = next(report for report in rendered.reports if report.name == "Birch & Co Architects")
    for suffix in (".txt", ".html", ".md"):
        text = body(rendered, client, suffix)
        assert "No site was checked after the updates." in text and "0 of 0" not in text, suffix


def test_a_site_revived_tonight_is_named_in_every_format(tmp_path) -> None:
    from datetime import date

    from reporting.run_report import render_reports
    from tests.reporting.builder import build_summary

    summary = build_summary(date(2026, 11, 21), xss_probe=False)
    revived = next(site for site in summary.sites if site.client and site.status == "online")
    revived.revived = True
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    said = (f"1 site the dashboard kept as known offline answered a check tonight and was maintained again: "
            f"{revived.site_name}.")
    for suffix in (".txt", ".md", ".html"):  # Markdown escapes its own characters
        assert said in body(rendered, rendered.operator, suffix).replace("\\", "").replace("\n", " "), suffix
    [own] = [report for report in rendered.reports[1:] if report.name == revived.client]
    assert (f"1 site that could not be reached on earlier nights answered tonight and was maintained again: "
            f"{revived.site_name}.") in body(rendered, own, ".txt")
    assert "known offline" not in body(rendered, own, ".txt")  # the dashboard's term is the operator's
    others = [report for report in rendered.reports[1:] if report.name != revived.client]
    assert others and all("known offline" not in body(rendered, report, ".txt") for report in others)


def test_the_feed_sentence_names_the_copy_in_use_by_its_source_and_age() -> None:
    """Issue 44: a changed FLEET_VULN_FEED that failed to read left the report naming the wrong source."""
    from datetime import UTC, datetime, timedelta

    from fleet.model.summary import Summary
    from fleet.model.vulnerability import FeedStatus
    from reporting.vulnerability_section import feed_line

    night = datetime(2026, 11, 28, 2, tzinfo=UTC)
    copy = FeedStatus(source="https://mirror.example/feed", fetched_at=(night - timedelta(hours=5)).isoformat(),
                      records=3)
    summary = Summary(run_id="r", started_at=night, finished_at=night, vulnerability_feed=copy)
    assert feed_line(summary, client=False) == ("Checked against the vulnerability feed of 27 Nov 2026 21:00 UTC "
                                                "(5 h old) (https://mirror.example/feed).")
    assert "mirror.example" not in feed_line(summary, client=True)
    summary.vulnerability_feed = copy.model_copy(update={"problem": "FLEET_VULN_FEED (/srv/typo.json) cannot be read"})
    said = feed_line(summary, client=False)
    assert "(/srv/typo.json) cannot be read" in said and said.endswith("(5 h old) (https://mirror.example/feed), was "
                                                                        "used.")
