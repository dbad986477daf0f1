"""The operator's and a client's report seen in a real browser (headless Chromium): the alarm of a night that
broke a site is the first thing on screen. Skipped where no Chromium is installed (`apt-get install chromium`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from reporting.run_report import render_reports
from tests.reporting.test_held_for_review import CLIENT, broken_night  # noqa: F401 - the fixture

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
ALARM_RED = (0xD6, 0x45, 0x45)


def screenshot(html: Path, png: Path) -> Image.Image:
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run", "--window-size=760,1400",
                    f"--screenshot={png}", html.as_uri()], check=True, capture_output=True, timeout=120)
    return Image.open(png).convert("RGB")


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
