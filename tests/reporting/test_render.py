"""Rendered reports tell the same numbers as summary.json, keep clients apart, and escape what they show."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from datetime import date
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from fleet.model.summary import Outcome, Summary
from fleet.model.vocabulary import LEFT_OUT, Term, Voice, client_voice, operator_voice
from reporting.render import data_uri
from reporting.run_report import OPERATOR, RenderedRun, render_reports, render_run
from tests.reporting.builder import CLIENTS, UNASSIGNED, XSS, build_summary
from tests.reporting.conftest import body

NIGHT = date(2026, 11, 21)


class Marked(HTMLParser):
    """Collects the values the HTML marks with data-metric / data-outcome / data-group, and data-row counts."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.values: dict[str, int] = {}
        self.rows: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self._open: str | None = None
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        attributes = dict(attrs)
        for name in ("data-metric", "data-outcome", "data-group"):
            if name in attributes:
                self._open = f"{name[5:]}:{attributes[name]}"
        if "data-row" in attributes:  # a grouped row stands for the items of all its sites
            self.rows[attributes["data-row"]] += int(attributes.get("data-items", 1))

    def handle_data(self, data):
        if self._open and data.strip():
            self.values[self._open] = int(re.sub(r"\D", "", data))
            self._open = None


def expected(run_dir: Path, client: str | None) -> dict[str, int]:
    """The numbers straight from summary.json, scoped to a client, without the report code."""
    raw = json.loads((run_dir / "summary.json").read_text())
    items = [i for i in raw["items"] if client is None or i["client"] == client]
    sites = [s for s in raw["sites"] if client is None or s["client"] == client]
    by_outcome = Counter(i["outcome"] for i in items)
    checked = [s["check"] for s in sites if s["check"] is not None]
    numbers = {o.value: by_outcome.get(o.value, 0) for o in Outcome}
    numbers |= {
        "total": len(items),
        "sites": len(sites),
        "not_updated": len(items) - by_outcome["updated"],
        "checked": len(checked),
        "healthy": sum(
            1 for c in checked if c["error"] is None and c["online"] is not False and c["probe_ok"] is not False
        ),
        "open_incidents": sum(c["open_incidents"] for c in checked),
    }
    if client is None:
        assert {k: v for k, v in raw["counts"]["by_outcome"].items() if v} == {k: v for k, v in by_outcome.items()}
    return numbers


def in_words(numbers: dict[str, int], client: bool) -> tuple[Voice, dict[Term, int]]:
    """The report's words, and the number each of them should carry (every word, zero or not)."""
    voice = client_voice() if client else operator_voice()
    by_outcome = {outcome: numbers[outcome.value] for outcome in Outcome}
    return voice, {term: voice.total(by_outcome, term) for term in voice.ordered()}


def listed(term: Term, said: dict[Term, int], client: bool) -> int:
    """Items of a word the not-done section lists: a client reads what was left out on purpose as a sentence."""
    return 0 if client and term == LEFT_OUT else said[term]


def check_left_out(document: str, numbers: dict[str, int], client: bool) -> None:
    left_out = numbers["ignored"] + numbers["excluded"]
    found = re.search(r"Left out on purpose (\d+) \(on \d+ sites?\)", document)
    assert (int(found.group(1)) if found else 0) == (left_out if client else 0)


def check_html(html: str, numbers: dict[str, int], client: bool) -> None:
    marked = Marked(html)
    voice, said = in_words(numbers, client)
    assert marked.values["metric:failed"] == said[voice.attention]
    for metric in ("updated", "not_updated", "sites", "checked", "healthy", "open_incidents"):
        assert marked.values[f"metric:{metric}"] == numbers[metric], metric
    for term, number in said.items():
        assert marked.values.get(f"outcome:{term.key}", 0) == number, term
        if term != voice.done:
            assert marked.values.get(f"group:{term.key}", 0) == listed(term, said, client), term
            assert marked.rows[term.key] == listed(term, said, client), term
    assert marked.values["outcome:total"] == numbers["total"]
    assert marked.rows["updated"] == numbers["updated"]  # every updated item is listed (under the row cap)
    check_left_out(html, numbers, client)


def check_text(text: str, numbers: dict[str, int], client: bool) -> None:
    voice, said = in_words(numbers, client)
    def unit(number: int) -> str:  # every tile's count says what it counts
        return "Item" if number == 1 else "Items"

    for label, number in (("Sites" if numbers["sites"] != 1 else "Site", numbers["sites"]),
                          (f"{unit(numbers['updated'])} updated", numbers["updated"]),
                          (f"{unit(numbers['not_updated'])} not updated", numbers["not_updated"]),
                          (f"{unit(said[voice.attention])} {voice.attention.word}", said[voice.attention])):
        assert re.search(rf"^  {label}\s+(\d+)$", text, re.M).group(1) == str(number), label
    glance = text.split("  By outcome:\n", 1)[1].split("\n\n", 1)[0]
    for term, number in said.items():
        found = re.search(rf"^  {re.escape(term.title)}\s+(\d+)$", glance, re.M)
        assert (int(found.group(1)) if found else 0) == number, term
        if term != voice.done and listed(term, said, client):
            group = re.search(rf"^{re.escape(term.title)} \((\d+)\): ", text, re.M)
            assert int(group.group(1)) == number
    assert re.search(r"^  Total\s+(\d+)$", text, re.M).group(1) == str(numbers["total"])
    assert re.search(r"^Not updated, and why \((\d+)\)$", text, re.M).group(1) == str(numbers["not_updated"])
    check_left_out(text, numbers, client)
    health = re.search(r"^(\d+) of (\d+) sites? checked healthy after the updates; (\d+) open uptime alerts?", text,
                       re.M)
    assert tuple(map(int, health.groups())) == (numbers["healthy"], numbers["checked"], numbers["open_incidents"])


def check_markdown(md: str, numbers: dict[str, int], client: bool) -> None:
    voice, said = in_words(numbers, client)
    tiles = re.search(r"^\| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$", md, re.M)
    assert tuple(map(int, tiles.groups())) == (numbers["updated"], numbers["not_updated"], said[voice.attention],
                                               numbers["sites"])
    for term, number in said.items():
        found = re.search(rf"^\| {re.escape(term.title)} \| (\d+) \|$", md, re.M)
        assert (int(found.group(1)) if found else 0) == number, term
    updated_section = md.split("## Updated", 1)[1].split("\n## ", 1)[0] if numbers["updated"] else ""
    assert len(re.findall(r"^\| (?!Site \||---)", updated_section, re.M)) == numbers["updated"]


def test_every_report_tells_the_numbers_of_summary_json(rendered: RenderedRun):
    assert [r.name for r in rendered.reports] == [OPERATOR, *sorted(CLIENTS)]
    for report in rendered.reports:
        numbers = expected(rendered.run_dir, None if report.name == OPERATOR else report.name)
        assert numbers["total"] > 0
        client = report.name != OPERATOR
        check_html(body(rendered, report, ".html"), numbers, client)
        check_text(body(rendered, report, ".txt"), numbers, client)
        check_markdown(body(rendered, report, ".md"), numbers, client)


def test_operator_report_has_every_section(rendered: RenderedRun):
    operator = rendered.operator
    html, text, markdown = (body(rendered, operator, suffix) for suffix in (".html", ".txt", ".md"))
    for title in ("At a glance", "Updated", "Not updated, and why", "Plugin versions that failed", "Health checks",
                  "By client", "By type", "Trends, last 5 runs"):  # fmt: skip
        assert title in html and title in markdown, title
    assert operator.charts == ("outcomes-per-night", "plugin-failure-rate")
    for cid in operator.charts:
        png = rendered.chart_path(operator, cid).read_bytes()
        assert png.startswith(b"\x89PNG")
        assert f'src="{data_uri(png)}"' in html and f"]({data_uri(png)})" in markdown  # the files carry their charts
    by_client = {
        label.strip(): [int(n) for n in numbers]
        for label, *numbers in re.findall(r"^  (.{30}) +(\d+) +(\d+) +(\d+) +(\d+)$", text.split("\nBy client\n")[1]
                                          .split("\nBy type\n")[0], re.M)
    }  # fmt: skip
    assert sum(updated + not_updated for _, updated, not_updated, _ in by_client.values()) == (
        expected(rendered.run_dir, None)["total"]
    )
    assert by_client["(no client)"][0] == len(UNASSIGNED)


def other_clients_marks(client: str) -> list[str]:
    marks = [d for other, sites in CLIENTS.items() if other != client for d, _ in sites]
    marks += [name for other, sites in CLIENTS.items() if other != client for _, name in sites]
    marks += [other for other in CLIENTS if other != client]
    return marks + [d for d, _ in UNASSIGNED] + [name for _, name in UNASSIGNED] + ["dashboard.agency.example"]


def test_a_client_report_holds_no_other_clients_site(rendered: RenderedRun):
    for report in rendered.reports[1:]:
        own = [d for d, _ in CLIENTS[report.name]]
        report_html = body(rendered, report, ".html")
        shown = " ".join([html.unescape(report_html), body(rendered, report, ".txt"),
                          body(rendered, report, ".md").replace("\\", "")])  # fmt: skip
        assert any(domain in shown for domain in own)
        for mark in other_clients_marks(report.name):
            assert mark not in shown, f"{report.name} report shows {mark!r}"
        assert "By client" not in report_html and "rule:" not in shown  # policy internals are the operator's


def test_untrusted_names_are_text_in_every_format(tmp_path: Path):
    summary = build_summary(NIGHT)
    evil_client = '<img src=x onerror="alert(2)"> & Co'
    for item in summary.items:
        if item.client == "Acme Dental":
            item.client = evil_client
            item.reason = f"{XSS} | *bold* [link](javascript:alert(3))"
    for site in summary.sites:
        if site.client == "Acme Dental":
            site.client = evil_client
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run")
    markdown = MarkdownIt("commonmark", {"html": True}).enable("table")
    for report in rendered.reports:
        report_html, text, md = (body(rendered, report, suffix) for suffix in (".html", ".txt", ".md"))
        assert "<script" not in report_html and "<img src=x" not in report_html
        assert "<script" not in md and "<img" not in md
        md_html = markdown.render(md)
        assert "<script" not in md_html and "<img src=x" not in md_html and 'href="javascript' not in md_html
        shown_names = [XSS] if report.name in (OPERATOR, evil_client) else []
        for name in shown_names:
            assert html.escape(name, quote=False) in report_html
            assert name in text
            assert html.escape(name, quote=False) in md_html
    client = next(r for r in rendered.reports if r.name == evil_client)
    assert html.escape(evil_client, quote=False) in body(rendered, client, ".html")
    assert evil_client in body(rendered, client, ".txt")
    assert "onerror" in client.subject  # shown as text in the subject, which is not HTML
    assert all("/" not in path.name.removesuffix(path.suffix) for path in rendered.files)


def test_a_night_with_nothing_to_update_is_sensible_and_hides_empty_sections(tmp_path: Path):
    build_summary(NIGHT, updates=False).write(tmp_path / "only")
    rendered = render_reports(tmp_path / "only")
    report_html, text, md = (body(rendered, rendered.operator, suffix) for suffix in (".html", ".txt", ".md"))
    headings = re.findall(r"<h2[^>]*>([^<]+)<", report_html)
    assert [h.strip() for h in headings] == ["Health checks"]  # checks still ran and are still worth reading
    assert re.findall(r"^## (.+)$", md, re.M) == ["Health checks"]
    assert "Not updated, and why" not in text and "By outcome" not in text
    assert "All 11 sites were up to date: there was nothing to update." in text
    assert rendered.operator.subject.endswith(": updated 0 items")


def test_a_night_where_nothing_was_updated_says_why(tmp_path: Path):
    summary = build_summary(NIGHT)
    for item in summary.items:
        if item.outcome is Outcome.updated:
            item.outcome, item.reason, item.until = Outcome.held, "Change freeze", date(2026, 12, 1)
    summary.counts = summary.count(summary.items)
    summary.write(tmp_path / "held")
    result = render_run(tmp_path / "held", send=False)
    report = (tmp_path / "held" / "report" / "operator.txt").read_text()
    assert result.ok and result.deliveries == []
    assert "Updated 0 of " in report
    assert "Updated (" not in report and "Hold ends 01 Dec 2026" in report
    check_text(report, expected(tmp_path / "held", None), client=False)


@pytest.mark.parametrize("rows", [3])
def test_long_lists_show_their_first_rows_and_fold_the_rest(nights: list[Path], tmp_path: Path, rows: int):
    from tests.reporting.test_long_lists import Folds

    run_dir = tmp_path / nights[-1].name  # alone: the module's rendered files stay as they are
    Summary.read(nights[-1]).write(run_dir)
    rendered = render_reports(run_dir, max_rows=rows)
    updated = expected(run_dir, None)["updated"]
    assert f"and {updated - rows} more items updated (all are in the HTML report and in summary.json)" in body(
        rendered, rendered.operator, ".txt")
    html = body(rendered, rendered.operator, ".html")
    [folded] = [fold for fold in Folds(html).found if fold.key == "updated"]
    assert Marked(html).rows["updated"] == rows and len(folded.rows) == updated - rows
    assert folded.said == f"{updated - rows} more items updated"


def test_trends_take_only_earlier_runs_of_the_same_dashboard_and_kind(nights: list[Path], tmp_path: Path, caplog):
    import shutil

    from reporting.history import earlier_runs, read_head

    base = tmp_path / "runs"
    shutil.copytree(nights[0].parent, base)
    later = build_summary(date(2026, 12, 1))
    later.write(base / "later")
    other = build_summary(date(2026, 11, 20), run_id="other-dashboard")
    other.dashboard = "https://another.example"
    other.write(base / "other")
    dry = build_summary(date(2026, 11, 20), run_id="dry")
    dry.dry_run = True
    dry.write(base / "dry")
    (base / "broken").mkdir()
    (base / "broken" / "summary.json").write_text('{"run_id": "broken", "started_at": ')
    current_dir = base / nights[-1].name
    current = Summary.read(current_dir)

    earlier = earlier_runs(current_dir, current, runs=3)
    assert [path.parent.name for path in earlier] == [night.name for night in nights[-3:-1]]
    assert "trend: skipping" in caplog.text and "broken" in caplog.text
    rendered = render_reports(current_dir, trend_runs=3)
    trend = body(rendered, rendered.operator, ".txt").split("Trends, last 3 runs\n")[1]
    assert re.findall(r"^  (\d\d Nov 2026) ", trend, re.M) == [f"{day} Nov 2026" for day in (21, 20, 19)]
    head = read_head(base / "other" / "summary.json")
    assert (head.dashboard, head.dry_run, head.started_at) == (other.dashboard, False, other.started_at)
