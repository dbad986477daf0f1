"""Reports people can read, checked in the real browser the screenshot tests drive (the system Chromium through
Playwright): every report passes axe-core's WCAG 2 A and AA rules (contrast, tables, headings, language, ...), no
table runs its columns together (measured on the rendered text, not read from the markup), long lists are whole
in the HTML (folded, not cut), a zero is never green, and the first screen says what happened tonight. Skipped
where no Chromium is installed (`apt-get install chromium`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.model.summary import Summary
from reporting.run_report import render_reports
from tests.reporting.builder import write_dry_run, write_long_lists, write_looks, write_nights, write_security
from tests.reporting.test_held_for_review import CLIENT
from tests.reporting.test_screenshot import CHROMIUM

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed")

# every text cell's rendered text, per row of every data table: [[(left, right, text), ...], ...]
CELL_TEXT = """() => [...document.querySelectorAll('table.grid tr')].map(row => [...row.children].map(cell => {
    const range = document.createRange(); range.selectNodeContents(cell);
    const boxes = [...range.getClientRects()].filter(box => box.width > 0 && box.height > 0);
    if (!boxes.length) return null;
    return [Math.min(...boxes.map(b => b.left)), Math.max(...boxes.map(b => b.right)), cell.innerText.trim()];
}).filter(Boolean)).filter(cells => cells.length > 1)"""
NEAREST = 6  # px between one column's text and the next's, at the least


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The operator's report and a client's of a night with every outcome, known vulnerabilities, a site broken and
    its pictures, and every list longer than the rows it shows in full (rendered with 4 of them, so that the folds
    are many and the axe run short: a fold is one macro), and the operator's report of a dry run: every part the
    templates have (the other clients' reports are made of the same parts)."""
    base = tmp_path_factory.mktemp("reports")
    night = write_nights(base, nights=2, xss_probe=False)[-1]
    write_long_lists(write_security(write_looks(Summary.read(night), night), night), night)
    rendered = render_reports(night, max_rows=4)
    client = next(report for report in rendered.reports if report.name == CLIENT)
    dry = render_reports(write_dry_run(base, Summary.read(night).started_at.date()))
    return [rendered.path(rendered.operator, ".html"), rendered.path(client, ".html"),
            dry.path(dry.operator, ".html")]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_every_report_passes_axe_cores_contrast_and_structure_rules(reports: list[Path], browser) -> None:
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    page = browser.new_page(viewport={"width": 760, "height": 1400})
    found = {}
    for html in reports:
        page.goto(html.as_uri())
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")  # the folded too
        results = axe.run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21aa"]},
                                         "resultTypes": ["violations"]})
        if results.violations_count:
            found[html.name] = results.generate_report()
    page.close()
    assert not found, "\n\n".join(f"{name}:\n{report}" for name, report in found.items())


def test_no_table_runs_its_columns_together(reports: list[Path], browser) -> None:
    page = browser.new_page(viewport={"width": 760, "height": 1400})
    touching = []
    for html in reports:
        page.goto(html.as_uri())
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
        for row in page.evaluate(CELL_TEXT):
            for (_, right, text), (left, _, following) in zip(row, row[1:], strict=False):
                if left - right < NEAREST:
                    touching.append(f"{html.name}: {text!r} | {following!r} ({left - right:.1f} px apart)")
    page.close()
    assert not touching, "\n".join(touching[:20])


def test_long_lists_are_whole_in_the_html_and_folded(reports: list[Path]) -> None:
    operator = reports[0].read_text()
    shown = operator.count("Wordfence Security</span> (plugin)")
    folded = len(re.findall(r"<li>[^<]*: Wordfence Security \(plugin\) 7\.11\.7: CVE-", operator))
    assert (shown, folded) == (10, 20), "every installed item with no fix is listed, the first 10 in full"
    assert "<details" in operator and "summary.json" not in operator


def test_a_zero_is_never_green_and_the_first_screen_says_tonight(reports: list[Path], browser) -> None:
    page = browser.new_page(viewport={"width": 760, "height": 900})
    for html in reports:
        page.goto(html.as_uri())
        for tile in page.query_selector_all(".tile-number"):
            if tile.inner_text().strip() == "0":
                colour = tile.evaluate("node => getComputedStyle(node).color")
                assert colour not in ("rgb(31, 157, 85)",), f"{html.name}: a green 0"
        lead = page.query_selector(".lead")
        alarms = [alarm.bounding_box()["y"] for alarm in page.query_selector_all(".alarm")
                  if alarm.get_attribute("data-row") != "not-installed-while-vulnerable"]
        first = min([lead.bounding_box()["y"], *alarms])  # what happened tonight: a break's alarm, or the headline
        assert first < 900, f"{html.name}: neither tonight's alarm nor its headline is on the first screen"
        security = page.query_selector('[data-row="security"]')
        if security is not None:
            assert security.bounding_box()["y"] > lead.bounding_box()["y"], "the feed's paragraph comes first"
    page.close()

