"""The night's screenshots in the reports: the broken site's pictures lead the operator's report, review sites
have their section, a client sees a before/after pair per site, the e-mail carries them as inline parts, and
neither a missing file nor a hostile page name breaks or subverts a report. The PNGs are drawn with Pillow."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from datetime import date
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import markdown as markdown_lib
import pytest
from PIL import Image

from fleet.model.summary import Band, PageLook, SiteLook, Summary
from reporting import looks as looks_module
from reporting.looks import client_page, draw, operator_looks
from reporting.run_report import OPERATOR, RenderedRun, deliver_reports, render_reports
from reporting.settings import MailSettings
from tests.reporting.builder import BROKEN_LOOK, REVIEW_LOOK, build_summary, write_looks
from tests.reporting.conftest import body

HOSTILE = "<img src=x onerror=alert(1)>checkout"
CLIENT = "Northwind Bakery"  # its shop is the broken site
_PICTURE = re.compile(r'data-picture="(\w+)"[^>]*>\s*<div class="shot-label"[^>]*>[^<]*</div>\s*(?:<a [^>]*>)?'
                      r'<img [^>]*src="data:image/jpeg;base64,([^"]+)"')


def night_with_looks(base: Path) -> Path:
    summary = build_summary(date(2026, 3, 9), xss_probe=False, run_id=f"looks-{base.name}")
    run_dir = base / summary.run_id
    write_looks(summary, run_dir, page_name=HOSTILE)
    return run_dir


@pytest.fixture(scope="module")
def looks_run(tmp_path_factory: pytest.TempPathFactory) -> RenderedRun:
    return render_reports(night_with_looks(tmp_path_factory.mktemp("looks")))


def report_of(rendered: RenderedRun, name: str):
    return next(report for report in rendered.reports if report.name == name)


def pictures(html: str) -> list[tuple[str, Image.Image]]:
    """Each picture of an HTML report in order: its label and the image it shows."""
    return [(label, Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
            for label, data in _PICTURE.findall(html)]  # fmt: skip


def unstyled(html: str) -> str:
    """The HTML without the styles css-inline put on every element."""
    return re.sub(r' style="[^"]*"', "", html)


def white_share(image: Image.Image) -> float:
    """The share of near-white pixels below the page's header (a blanked page is almost all white)."""
    below = image.crop((0, 80, image.width, image.height))
    pixels = list(below.getdata())
    return sum(1 for r, g, b in pixels if min(r, g, b) > 235) / len(pixels)


def test_the_broken_sites_pictures_lead_the_operators_report_and_review_sites_have_their_section(
    looks_run: RenderedRun,
):
    html = unstyled(body(looks_run, looks_run.operator, ".html"))
    alarm, tiles = html.index('class="alarm"'), html.index('class="tiles"')
    review, glance = html.index("Looks different: for review"), html.index("At a glance")
    shown = pictures(html)
    first = html.index('data-picture="before"')

    assert alarm < first < tiles, "the broken site's pictures are inside the alarm, before anything else"
    assert tiles < review < glance, "the review section comes right after the headline"
    broken_pages = re.findall(r'<div class="why">([^<]+) · broken · ', html[alarm:tiles])
    assert broken_pages[0] == "home (mobile)" and len(broken_pages) == 3  # worst first: 61% before 42%
    assert [label for label, _ in shown[:3]] == ["before", "after", "changes"]
    (_, before), (_, after), (_, changes) = shown[:3]
    assert white_share(after) > 0.95 > 0.6 > white_share(before), "the after picture shows the blanked page"
    assert sum(1 for r, g, b in changes.getdata() if r > 200 and g < 60 and b < 60) > changes.width * 100
    assert before.width == 360 and before.height <= 540  # small, not the full-page screenshot
    in_review = html[review:glance]
    assert "Acme Dental" in in_review and in_review.count('data-picture="') == 3 and "1.7% changed" in in_review
    assert html.count("data-look=") == 2, "healthy sites are only counted"
    assert "8 sites looked as before; 1 looks broken; 1 looks different, for review" in html
    assert 'href="../visual/shop.northwindbakery.co.uk/mobile/home.after.png"' in html  # the full size, on disk


def test_text_and_markdown_name_the_band_score_page_and_image_paths(looks_run: RenderedRun):
    text = body(looks_run, looks_run.operator, ".txt")
    md = body(looks_run, looks_run.operator, ".md")
    folder = f"visual/{BROKEN_LOOK}/mobile"
    for line in ("- home (mobile): broken, 61.1% changed", f"before:  {folder}/home.before.png",
                 f"after:   {folder}/home.after.png", f"changes: {folder}/home.diff.png",
                 "- home (desktop): review, 1.7% changed", f"visual/{REVIEW_LOOK}/desktop/home.diff.png",
                 "8 sites looked as before"):  # fmt: skip
        assert line in text, line
    assert text.index("home (mobile): broken") < text.index("THE NIGHT BROKE") + 2000 < len(text)
    assert text.index("home (mobile): broken") < text.index("Looks different: for review") < text.index("Numbers")
    assert "## Looks broken (1)" in md and "## Looks different: for review (1)" in md
    assert md.index("## Looks broken") < md.index("## Looks different") < md.index("## At a glance")
    assert f"| home \\(mobile\\) | broken | 61.1% changed | {folder}/home.before.png |" in md
    assert md.count("](data:image/jpeg;base64,") == 4  # the changes picture of each pictured page


@pytest.mark.long(17)
def test_a_clients_report_shows_a_before_and_after_pair_per_site(looks_run: RenderedRun):
    client = report_of(looks_run, CLIENT)
    html = unstyled(body(looks_run, client, ".html"))
    pairs = re.findall(r'data-row="pair">\s*<h3>([^<]+?) <span', html)
    assert pairs == ["Northwind Shop", "Northwind Bakery", "Northwind Catering"]  # the broken one first
    shown = pictures(html)
    assert [label for label, _ in shown] == ["before", "after"] * 3
    assert all(image.width == 480 and image.height == 700 for _, image in shown)
    assert white_share(shown[1][1]) > 0.95 > 0.6 > white_share(shown[0][1])  # the shop's home page, blanked
    assert "the home page on a computer" in html and "changed" not in html.split("Before and after")[1][:4000]
    assert "Acme Dental" not in html and "acmedental" not in html  # nobody else's site
    assert "Screenshots before and after" not in html  # the operator's count of the fleet
    md = body(looks_run, client, ".md")
    assert md.count("](data:image/jpeg;base64,") == 6 and "## Before and after" in md
    text = body(looks_run, client, ".txt")
    assert "- Northwind Shop (https://shop.northwindbakery.co.uk): Looked broken after the updates" in text
    assert "visual/" not in text  # the run directory's paths mean nothing to a client


def test_the_client_page_is_the_home_page_on_a_computer_unless_another_looks_worse():
    def page(name: str, viewport: str, band: Band, score: float) -> PageLook:
        return PageLook(page=name, viewport=viewport, url="https://a.example/", band=band, score=score)

    home = page("home", "desktop", Band.healthy, 0.001)
    look = SiteLook(site_id=1, site_url="https://a.example", site_name="A", band=Band.review,
                    pages=[page("shop", "desktop", Band.healthy, 0.004), home])  # fmt: skip
    assert client_page(look) is home  # same band: the home page, even with a higher score elsewhere
    worse = page("home", "mobile", Band.review, 0.02)
    look.pages.append(worse)
    assert client_page(look) is worse


def message_of(eml: Path) -> EmailMessage:
    return message_from_bytes(eml.read_bytes(), policy=policy.default)


def test_the_mail_carries_the_pictures_as_inline_parts_the_html_refers_to(looks_run: RenderedRun, tmp_path: Path):
    shutil.copytree(looks_run.run_dir, tmp_path / "run")
    rendered = RenderedRun(tmp_path / "run", looks_run.run_id, False, looks_run.reports)
    deliveries = deliver_reports(rendered, MailSettings(_env_file=None, report_to=["ops@agency.example"]))
    emls = {d.report: Path(d.eml_path) for d in deliveries if d.eml_path}
    for name, shown in ((CLIENT, 6), (OPERATOR, 12)):
        message = message_of(emls[name])
        html = message.get_body(("html",)).get_content()
        parts = {part["Content-ID"].strip("<>"): part.get_content() for part in message.walk()
                 if part.get_content_type() == "image/jpeg"}  # fmt: skip
        report = report_of(rendered, name)
        distinct = {rendered.picture_path(report, cid).read_bytes() for cid in report.pictures}
        assert len(report.pictures) == shown and len(parts) == len(distinct), name  # equal pictures: sent once
        assert name != CLIENT or len(distinct) == 4  # the two unchanged sites' before and after are one part
        referred = re.findall(r'<img [^>]*src="cid:(look-[^"]+)"', html)
        assert len(referred) == shown and set(referred) == set(parts), name
        for cid in report.pictures:  # every picture reaches the reader, as drawn
            assert rendered.picture_path(report, cid).read_bytes() in parts.values()
        for cid, jpeg in parts.items():
            assert jpeg == rendered.picture_path(report, cid).read_bytes()
        assert "data:image" not in html and "../visual/" not in html  # no inline data, no link to a local file
        assert any(p.get_content_type() == "multipart/related" for p in message.walk())
        assert len(emls[name].read_bytes()) < 1_500_000


def test_pictures_are_capped_per_mail_and_the_report_says_how_many_were_left_out(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(looks_module, "MAX_PICTURED_PAGES", 2)
    monkeypatch.setattr(looks_module, "MAX_PAIRS", 1)
    rendered = render_reports(night_with_looks(tmp_path))
    html = body(rendered, rendered.operator, ".html")
    assert html.count('data-picture="') == 6 and len(rendered.operator.pictures) == 6
    assert "Pictures of 2 more pages are left out of this e-mail" in html
    assert "checkout" in body(rendered, rendered.operator, ".txt")  # still named, with its paths, in words
    client = report_of(rendered, CLIENT)
    assert body(rendered, client, ".html").count('data-row="pair"') == 1
    assert "Pictures of 2 more websites are left out" in body(rendered, client, ".html")


def test_pictures_stop_at_the_mails_byte_budget(looks_run: RenderedRun):
    summary = Summary.read(looks_run.run_dir)
    shown = operator_looks(summary.looks, [alarm.site_id for alarm in summary.broken])
    drawn = draw(shown, looks_run.run_dir, budget=1)  # the first page's pictures reach it
    assert {picture.cid for picture in drawn} == {"look-1-before", "look-1-after", "look-1-changes"}
    assert shown.left_out == 3 and [page.pictured for look in shown.broken for page in look.pages] == [
        True, False, False]


def test_missing_or_foreign_image_files_do_not_break_the_report(tmp_path: Path):
    run_dir = night_with_looks(tmp_path)
    (run_dir / f"visual/{BROKEN_LOOK}/mobile/home.after.png").unlink()
    shutil.rmtree(run_dir / f"visual/{REVIEW_LOOK}")
    (run_dir / f"visual/{BROKEN_LOOK}/desktop/home.diff.png").write_bytes(b"not a png")
    Image.new("RGB", (100, 100), "red").save(tmp_path / "outside.png")
    summary = Summary.read(run_dir)
    shop = next(look for look in summary.looks if look.site_url.endswith(BROKEN_LOOK))
    next(page for page in shop.pages if page.page == HOSTILE).before = "../outside.png"
    summary.write(run_dir)

    rendered = render_reports(run_dir)
    html = unstyled(body(rendered, rendered.operator, ".html"))
    assert re.search(r'data-missing="after">image missing<br><span class="path">visual/shop\.northwindbakery', html)
    assert 'data-missing="changes">image unreadable' in html
    assert 'data-missing="before">image outside the run directory' in html
    assert html.count('data-missing="') == 3 + 3  # and the review site's three
    assert "after:   visual/shop.northwindbakery.co.uk/mobile/home.after.png  (image missing)" in \
        body(rendered, rendered.operator, ".txt")
    acme = body(rendered, report_of(rendered, "Acme Dental"), ".html")
    assert acme.count(">image missing<") == 2  # the pair, each side saying so
    deliveries = deliver_reports(rendered, MailSettings(_env_file=None, report_to=["ops@agency.example"]))
    assert all(d.eml_path for d in deliveries)  # every message still built


def test_a_hostile_page_name_is_shown_as_text(looks_run: RenderedRun):
    html = body(looks_run, looks_run.operator, ".html")
    md = body(looks_run, looks_run.operator, ".md")
    text = body(looks_run, looks_run.operator, ".txt")
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;checkout (desktop)" in html
    assert "<img" not in md and "<img src=x" not in markdown_lib.markdown(md)
    assert f"- {HOSTILE} (desktop): broken" in text
    assert "&lt;img src=x onerror=alert(1)&gt;checkout" in markdown_lib.markdown(md)


async def test_the_report_task_publishes_the_visual_results_as_a_table(prefect_harness, tmp_path: Path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    from flows.report import report
    from orchestration.artifacts import artifact_key

    run_dir = night_with_looks(tmp_path)
    await report(str(run_dir), send=False)
    async with get_client() as client:
        found = {}
        for key in (artifact_key(run_dir.name), artifact_key(run_dir.name, "visual")):
            [found[key]] = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])), sort=ArtifactSort.CREATED_DESC,
                limit=1,
            )  # fmt: skip
    table = found[artifact_key(run_dir.name, "visual")]
    assert table.type == "table" and str(run_dir) in table.description
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [(row["site"], row["band"], row["page"]) for row in rows] == [
        ("Northwind Shop", "broken", "home (mobile)"), ("Northwind Shop", "broken", "home (desktop)"),
        ("Northwind Shop", "broken", f"{HOSTILE} (desktop)"), ("Acme Dental", "review", "home (desktop)")]
    assert rows[0]["score"] == "61.1%" and rows[0]["after"] == f"visual/{BROKEN_LOOK}/mobile/home.after.png"
    assert "8 sites looked as before" in table.description
    assert "](data:image/jpeg;base64," in found[artifact_key(run_dir.name)].data  # the changes, pictured
