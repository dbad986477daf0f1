"""What a first-time reader sees: a chart on the first night, health sentences that do not hide offline
sites, and the failure-rate chart's labels inside the picture."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from PIL import Image

from fleet.model.vocabulary import operator_voice
from reporting import charts
from reporting.model import Headline, PluginFailure
from reporting.render import data_uri
from reporting.run_report import render_reports
from tests.reporting.builder import write_nights
from tests.reporting.conftest import body


def test_the_first_night_has_a_chart_of_its_outcomes_by_type(tmp_path: Path):
    [night] = write_nights(tmp_path, nights=1)
    rendered = render_reports(night)
    for report in rendered.reports:
        if report.charts:
            assert report.charts == ("outcomes-by-type",)
    operator = rendered.operator
    assert operator.charts == ("outcomes-by-type",)
    png = rendered.chart_path(operator, "outcomes-by-type").read_bytes()
    html, markdown = body(rendered, operator, ".html"), body(rendered, operator, ".md")
    assert f'src="{data_uri(png)}"' in html and f"]({data_uri(png)})" in markdown
    assert html.index("This night's outcomes by type") > html.index("By type")


def test_all_healthy_is_never_said_over_sites_that_could_not_be_checked():
    headline = Headline(voice=operator_voice(), sites=40, sites_updated=30, items=100, by_outcome={}, checked=34,
                        healthy=34, open_incidents=0, unusable=6)
    assert headline.health == ("All 34 checked sites are healthy; 6 sites could not be worked on "
                               "(offline, suspended, disconnected or too old).")
    assert not headline.healthy_everywhere


def test_the_failure_rate_chart_keeps_100_percent_and_its_counts_inside_the_picture(tmp_path: Path):
    png = charts.failure_rate_per_plugin([PluginFailure("Broken Everywhere", "1.0", 12, 12),
                                          PluginFailure("Half Bad", "2.0", 10, 5)])
    path = tmp_path / "rate.png"
    path.write_bytes(png)
    image = Image.open(path).convert("L")
    width, height = image.size
    right_edge = [image.getpixel((width - 1 - x, y)) for x in range(4) for y in range(height)]
    assert min(right_edge) > 240, "something is drawn at the right edge: a label is cut off"


def test_a_night_that_broke_many_sites_shows_20_in_full_and_names_the_rest(tmp_path: Path):
    from fleet.model.summary import SiteAlarm
    from tests.reporting.builder import build_summary

    summary = build_summary(date(2026, 3, 9))
    summary.broken = [SiteAlarm(site_id=n, site_url=f"https://site-{n}.example", site_name=f"Site {n}",
                                saw="home page answered HTTP 500") for n in range(1, 26)]
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    text, html = body(rendered, rendered.operator, ".txt"), body(rendered, rendered.operator, ".html")
    assert "The night broke 25 sites" in text and "... and 5 more broken sites (all are in the HTML report" in text
    assert html.count('data-row="broken"') == 20 and all(f"Site {n} (https://site-{n}.example)" in html
                                                         for n in range(21, 26))
    assert rendered.operator.subject.startswith("BROKE 25 SITES: ")


def test_good_news_is_not_coloured_as_an_alarm_beside_sites_that_could_not_be_worked_on(tmp_path: Path):
    """Every checked site healthy, one site offline: the good news is green, the offline site said apart (it was
    all bold red, the good news with it)."""
    import re

    from fleet.model.summary import HealthCheck
    from tests.reporting.builder import build_summary

    headline = Headline(voice=operator_voice(), sites=40, sites_updated=30, items=100, by_outcome={}, checked=34,
                        healthy=34, open_incidents=0, unusable=6)
    assert [tone for _, tone in headline.health_parts] == ["good", "bad"]
    summary = build_summary(date(2026, 3, 9))
    for site in summary.sites:  # the offline site is not checked: it could not be worked on
        site.check = HealthCheck(online=True, http_code=200, probe_ok=True) if site.status == "online" else None
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    html, markdown = body(rendered, rendered.operator, ".html"), body(rendered, rendered.operator, ".md")
    assert re.search(r'<span class="ok"[^>]*>All \d+ checked sites are healthy</span>', html), html[:3000]
    assert not re.search(r'<span class="bad"[^>]*>All \d+ checked sites are healthy', html)
    assert re.search(r"[^*]All \d+ checked sites are healthy; \*\*1 site could not be worked on", markdown)


def test_every_count_in_a_subject_and_a_tile_says_what_it_counts(tmp_path: Path):
    import re

    from tests.reporting.builder import build_summary

    build_summary(date(2026, 3, 9)).write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    for report in rendered.reports:
        counts = report.subject.rsplit(": ", 1)[1].split("; ")
        assert all(re.fullmatch(r"[a-z ]+ \d+ items?", part) for part in counts), report.subject
    html = body(rendered, rendered.operator, ".html")
    labels = re.findall(r'<div class="tile-label"[^>]*>([^<]+)</div>', html)
    assert labels == ["items updated", "items not updated", "items failed", "sites"], labels


def test_a_dry_runs_capped_list_says_what_it_would_update(tmp_path: Path):
    from fleet.model.summary import DRY_RUN_RULE, Outcome
    from tests.reporting.builder import build_summary

    summary = build_summary(date(2026, 3, 9))
    summary.dry_run = True
    for item in summary.items:
        if item.outcome is Outcome.updated:
            item.outcome, item.rule = Outcome.excluded, DRY_RUN_RULE
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run", max_rows=10)
    for suffix in (".txt", ".html", ".md"):
        text = body(rendered, rendered.operator, suffix)
        assert "more updated item" not in text and "more items updated" not in text, suffix
        assert " more items would update" in text, suffix


def test_a_clients_chart_legend_is_whole_inside_the_picture(tmp_path: Path):
    """A client's words are long ("Outside the maintenance times", "Left out on purpose"): five in a row ran past
    both edges ("Left out on purpos"). The legend wraps onto more rows instead, nothing drawn at either edge."""
    from datetime import date as day

    from fleet.model.summary import Outcome
    from fleet.model.vocabulary import client_voice
    from reporting.model import BreakdownRow, TrendRow

    every = {outcome: 3 for outcome in Outcome}
    pictures = [charts.outcomes_by_type([BreakdownRow(label="Plugins", sites=3, by_outcome=every)], client_voice()),
                charts.outcomes_per_night([TrendRow(run_id=f"r{n}", day=day(2026, 3, n), by_outcome=every)
                                           for n in range(1, 8)], client_voice())]
    for number, png in enumerate(pictures):
        path = tmp_path / f"chart-{number}.png"
        path.write_bytes(png)
        image = Image.open(path).convert("L")
        width, height = image.size
        edges = [image.getpixel((x, y)) for x in (0, 1, width - 2, width - 1) for y in range(height)]
        assert min(edges) > 240, f"chart {number}: something is drawn at an edge: the legend is cut off"
