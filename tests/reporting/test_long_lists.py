"""Long lists are whole in the HTML, folded, never cut: a night whose every list is longer than the rows a report
shows in full (tests.reporting.builder.write_long_lists) names every row of every list in the operator's and the
client's HTML, each fold's summary says how many rows it holds, and the text and Markdown, shortened, say where
the whole list is (a client is never pointed at summary.json)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fleet.model.summary import Outcome, Summary
from reporting.run_report import RenderedRun, render_reports
from tests.reporting.builder import LONG_CLIENT, LONG_SITES, XSS, build_summary, write_long_lists, write_security
from tests.reporting.conftest import body

OPERATOR_WHERE = "(all are in the HTML report and in summary.json)"
CLIENT_WHERE = "(all are in the HTML version of this e-mail)"


@dataclass
class Fold:
    key: str
    said: str = ""  # its summary
    rows: list[str] = field(default_factory=list)  # one short row each (<li>)
    text: str = ""  # a fold of names: "a, b, c"

    @property
    def listed(self) -> list[str]:
        return self.rows or [name for name in self.text.split(", ") if name]


class Folds(HTMLParser):
    """Every fold of a report (<details data-fold=KEY>), its summary and its rows."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.found: list[Fold] = []
        self._fold: Fold | None = None
        self._where = ""
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "details" and "data-fold" in attributes:
            assert self._fold is None, "a fold inside a fold"
            self._fold = Fold(attributes["data-fold"])
        elif self._fold is not None and tag in ("summary", "li"):
            self._where = tag
            if tag == "li":
                self._fold.rows.append("")

    def handle_endtag(self, tag):
        if tag == "details" and self._fold is not None:
            self.found.append(self._fold)
            self._fold = None
        elif tag in ("summary", "li"):
            self._where = ""

    def handle_data(self, data):
        if self._fold is None:
            return
        if self._where == "summary":
            self._fold.said += data
        elif self._where == "li":
            self._fold.rows[-1] += data
        else:
            self._fold.text += data.strip()


def section(html: str, title: str | None) -> str:
    """The text of the report's section titled `title` (up to the next), or before the first section (None)."""
    parts = re.split(r"<h2\b", html)
    found = parts[0] if title is None else next(part for part in parts[1:] if part.split("</h2>")[0].count(title))
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", found)))


@pytest.fixture(scope="module")
def long_night(tmp_path_factory: pytest.TempPathFactory) -> RenderedRun:
    run_dir = tmp_path_factory.mktemp("long") / "2026-11-21T02-00-00"
    write_long_lists(build_summary(date(2026, 11, 21), xss_probe=False), run_dir)
    return render_reports(run_dir)


def names(numbers: range) -> list[str]:
    return [f"Harbor Site {n:03d}" for n in numbers]


def every_fold_says_how_many_it_holds(html: str) -> list[Fold]:
    found = Folds(html).found
    for fold in found:
        assert int(fold.said.split()[0]) == len(fold.listed), (fold.key, fold.said, len(fold.listed))
    return found


def test_the_operators_html_names_every_row_of_every_long_list(long_night: RenderedRun) -> None:
    html = body(long_night, long_night.operator, ".html")
    summary = Summary.read(long_night.run_dir)
    said = section(html, "Updated")
    assert all(name in said for name in names(range(1, LONG_SITES + 1)))
    said = section(html, "Not updated, and why")
    assert all(f"Download failed on {name}" in said for name in names(range(1, LONG_SITES + 1)))
    said = section(html, "Health checks")
    assert all(f"HTTP 500 on the home page of {name}" in said for name in names(range(1, 61)))
    said = section(html, None)  # the alarm leads the report
    assert all(f"{name} broke: HTTP 500" in said for name in names(range(1, 26)))
    said = section(html, "Not touched tonight")
    assert all(name in said for name in names(range(61, 96)))
    said = section(html, "Already down before the night")
    assert all(f"connection refused by {name}" in said for name in names(range(96, 151)))
    said = section(html, "Back in maintenance")
    assert all(name in said for name in names(range(101, 126)))
    said = section(html, "Plugin versions that failed")
    assert all(f"Harbor Widget {n} 2.1" in said for n in range(20))
    said = section(html, "Looks different: for review")
    assert all(name in said for name in names(range(61, 116)))
    assert "summary.json" not in html, "nothing is left for summary.json alone"
    folds = every_fold_says_how_many_it_holds(html)
    assert {fold.key for fold in folds} >= {"updated", "failed", "check", "already_down", "broken", "names",
                                            "plugin-failures", "looks"}, "a list longer than its first rows folds"
    updated = sum(1 for item in summary.items if item.outcome is Outcome.updated)
    assert html.count('data-row="updated"') + len(next(f for f in folds if f.key == "updated").rows) == updated


def test_the_clients_html_names_every_row_and_every_site(long_night: RenderedRun) -> None:
    [client] = [report for report in long_night.reports if report.name == LONG_CLIENT]
    html = body(long_night, client, ".html")
    for title, numbers in (("Updated", range(1, LONG_SITES + 1)), ("Not updated, and why", range(1, LONG_SITES + 1)),
                           ("Health checks", range(1, 61)), ("Not touched tonight", range(61, 96)),
                           ("Already down before the night", range(96, 151)), ("Back in maintenance", range(101, 126))):
        said = section(html, title)
        assert all(name in said for name in names(numbers)), title
    assert all(name in section(html, None) for name in names(range(1, 26)))
    assert "summary.json" not in html and "Download failed" not in html  # a client reads what happens next
    folds = every_fold_says_how_many_it_holds(html)
    assert {"updated", "check", "already_down", "broken", "names"} <= {fold.key for fold in folds}


def test_the_text_and_markdown_show_the_first_rows_and_say_where_the_rest_is(long_night: RenderedRun) -> None:
    [client] = [report for report in long_night.reports if report.name == LONG_CLIENT]
    for report, where in ((long_night.operator, OPERATOR_WHERE), (client, CLIENT_WHERE)):
        for suffix in (".txt", ".md"):
            text = body(long_night, report, suffix).replace("\\", "")  # Markdown's escapes
            shortened = re.findall(r"and (\d+) more[^\n]*?" + re.escape(where), text)
            assert len(shortened) >= 6, (report.name, suffix, shortened)  # updated, failed, checks, down, ...
            assert report is long_night.operator or "summary.json" not in text
            assert report is not long_night.operator or 0 < text.count("Download failed on") <= 25, "the first rows"
    text = body(long_night, long_night.operator, ".txt")
    assert "... and 5 more broken sites " + OPERATOR_WHERE in text
    assert "... and 5 more sites " + OPERATOR_WHERE in text  # the 55 already down, 50 shown


def test_a_list_of_thousands_is_whole_and_one_short_row_an_item(tmp_path: Path) -> None:
    """530 known vulnerabilities: every one in the HTML (10 in full, 520 folded), each folded row a few hundred
    bytes at most (a full row with its inlined style weighs about a kilobyte), so that 10,000 sites stay an
    e-mail a mail server takes."""
    sizes = {}
    for exposed in (30, 530):
        run_dir = tmp_path / str(exposed) / "2026-11-21T02-00-00"
        build_summary(date(2026, 11, 21), xss_probe=False).write(run_dir)
        write_security(Summary.read(run_dir), run_dir, exposed=exposed)
        rendered = render_reports(run_dir)
        html = body(rendered, rendered.operator, ".html")
        sizes[exposed] = len(html.encode())
    assert all(f"CVE-2026-{20000 + n}" in html for n in range(530))
    [fold] = [fold for fold in every_fold_says_how_many_it_holds(html) if fold.key == "security"
              and "CVE-2026-20529" in " ".join(fold.rows)]
    assert len(fold.rows) == 520 and html.count('data-row="security-row"') >= 10
    assert (sizes[530] - sizes[30]) / 500 < 300, f"{(sizes[530] - sizes[30]) / 500:.0f} bytes a folded row"
    text = body(rendered, rendered.operator, ".txt")
    assert "... and 510 more " + OPERATOR_WHERE in text


def test_a_folded_row_is_escaped_like_every_other_value(tmp_path: Path) -> None:
    """The folded rows are set aside while the CSS is inlined, behind a comment: a name from the dashboard that is
    a script, or looks like that comment, is still text."""
    summary = build_summary(date(2026, 11, 21))  # a plugin named like a script on several sites
    marker = "<!--aside:0:0-->"
    for item in summary.items:
        item.site_name = f"{item.site_name} {marker}"
    summary.write(tmp_path / "run")
    rendered = render_reports(tmp_path / "run", max_rows=1)
    html = body(rendered, rendered.operator, ".html")
    [updated] = [fold for fold in Folds(html).found if fold.key == "updated"]
    assert any(XSS in row for row in updated.rows) and all(marker in row for row in updated.rows)
    assert "<script" not in html and marker not in html and "&lt;!--aside:0:0--&gt;" in html
