"""The operator's and a client's report seen in a real browser (headless Chromium): the alarm of a night that
broke a site is the first thing on screen, with the broken page's pictures. Skipped where no Chromium is installed
(`apt-get install chromium`). `python -m tests.reporting.test_screenshot DIR` writes the docs' screenshots."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fleet.model.summary import Summary
from reporting.run_report import RenderedReport, RenderedRun, render_reports
from tests.reporting.builder import BROKEN_LOOK, page_image, write_dry_run, write_looks, write_nights
from tests.reporting.test_held_for_review import CLIENT, broken_night  # noqa: F401 - the fixture
from tests.reporting.test_looks import night_with_looks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
ALARM_RED = (0xB4, 0x23, 0x18)


def screenshot(html: Path, png: Path, height: int = 1400) -> Image.Image:
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run", f"--window-size=760,{height}",
                    f"--screenshot={png}", html.as_uri()], check=True, capture_output=True, timeout=120)
    return Image.open(png).convert("RGB")


def changes_red_rows(image: Image.Image) -> list[int]:
    """Rows showing the changes picture's red (the alarm's own red is darker: its red is 0xB4)."""
    pixels = np.asarray(image, dtype=np.int16)
    red = (pixels[..., 0] > 200) & (pixels[..., 1] < 50) & (pixels[..., 2] < 50)
    return [int(y) for y in np.flatnonzero(red.sum(axis=1) > 40)]


def colour_pixels(image: Image.Image, colour: tuple[int, int, int], tolerance: int = 12) -> int:
    return sum(1 for p in image.getdata() if all(abs(a - b) <= tolerance for a, b in zip(p, colour, strict=True)))


def red_rows(image: Image.Image) -> list[int]:
    """Rows whose left padding (inside the 640 px card) is the alarm's red."""
    return [y for y in range(image.height) if image.getpixel((75, y)) == ALARM_RED]


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed")
def test_the_alarm_leads_the_operators_and_the_clients_report_in_a_browser(broken_night: Path, tmp_path: Path):  # noqa: F811
    rendered = render_reports(broken_night)
    client = next(report for report in rendered.reports if report.name == CLIENT)
    for report in (rendered.operator, client):
        image = screenshot(rendered.path(report, ".html"), tmp_path / f"{report.file_stem}.png")
        assert image.size == (760, 1400)
        rows = red_rows(image)
        assert rows, f"{report.name}: no alarm on screen"
        assert rows[0] < 250, f"{report.name}: the alarm is not the first thing under the masthead"


@pytest.mark.long(20)
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed")
def test_the_broken_pages_pictures_lead_the_operators_report_and_a_client_sees_its_pair(tmp_path: Path):
    rendered = render_reports(night_with_looks(tmp_path))
    operator = screenshot(rendered.path(rendered.operator, ".html"), tmp_path / "operator.png")
    alarm, changes = red_rows(operator), changes_red_rows(operator)
    assert alarm and changes, "no alarm, or the changes picture did not show"
    assert alarm[0] < changes[0] < 600, "the broken page's pictures are not the first thing under the alarm's title"
    client = next(report for report in rendered.reports if report.name == CLIENT)
    image = screenshot(rendered.path(client, ".html"), tmp_path / "client.png")
    hero = page_image(BROKEN_LOOK, "desktop").getpixel((200, 120))  # the shop's hero, before the night blanked it
    assert colour_pixels(image, hero) > 5000, "the client's before picture did not show"


def write_samples(base: Path, docs: Path) -> list[Path]:
    """The docs' screenshots, the full height of the first screens: a client's and the operator's report of the
    sample night, the dry run of the afternoon before it (`builder --dry-run`), and the reports of the night with
    pictures (`builder --looks`)."""
    nights = write_nights(base / "nights", xss_probe=False)
    dry_run = write_dry_run(base / "nights", Summary.read(nights[-1]).started_at.date())
    looks = write_nights(base / "looks", xss_probe=False)[-1]
    write_looks(Summary.read(looks), looks)
    night, rehearsal, pictured = (render_reports(run_dir) for run_dir in (nights[-1], dry_run, looks))

    def client(rendered: RenderedRun, name: str = CLIENT) -> RenderedReport:
        return next(report for report in rendered.reports if report.name == name)

    shots: dict[str, tuple[RenderedRun, RenderedReport]] = {
        "sample-report.png": (night, client(night, "Acme Dental")),
        "sample-operator-report.png": (night, night.operator),
        "sample-dry-run-report.png": (rehearsal, rehearsal.operator),
        "sample-operator-looks.png": (pictured, pictured.operator),
        "sample-client-looks.png": (pictured, client(pictured)),
    }
    for name, (rendered, report) in shots.items():
        screenshot(rendered.path(report, ".html"), docs / name, height=2600)
    return [docs / name for name in shots]


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for written in write_samples(Path(scratch), Path(sys.argv[1])):
            print(written)
