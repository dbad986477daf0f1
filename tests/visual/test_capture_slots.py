"""Each slot of the capture loads its pages one after another in one page of Chromium (a new page is a new renderer
process): what one page did is never told of the next, and a page whose shot failed is not used again. Pages served
over a socket by a small server of the test's own, so that each can misbehave as a real site's page does."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.visual.capture import CHROMIUM, PageCapture, chromium_path
from fleet.visual.pages import PageTarget
from fleet.visual.policy import Viewport

PAGES = {
    # an error on the console, a picture gone, and a request its timers start that is still in flight when shot
    "/noisy": b"<html><body><h1>Noisy</h1><img src='/gone.png'><script>console.error('noisy broke');"
              b"setTimeout(() => fetch('/slow'), 10)</script></body></html>",
    "/quiet": b"<html><body><h1>Quiet</h1><p>Nothing wrong here.</p></body></html>",
}
SLOW_S = 5.0  # /slow answers after this long; /hang never within a shot's timeout


class Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path in ("/slow", "/hang"):
            time.sleep(SLOW_S if self.path == "/slow" else 30)
        body = PAGES.get(self.path, b"" if self.path in ("/slow", "/favicon.ico") else None)
        try:
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body or b"")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page that asked for /slow or /hang was shot and left before the answer: as meant

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
async def one_slot(tmp_path: Path) -> AsyncIterator[PageCapture]:
    """One page loading at a time: every shot of a burst in the same slot."""
    if chromium_path() is None:
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's `chromium` to run the screenshot tests")
    async with PageCapture(tmp_path, concurrency=1, timeout_s=3) as capture:
        yield capture


def pages_opened(capture: PageCapture) -> list[object]:
    """Every page Chromium opens in the capture's contexts from now on."""
    opened: list[object] = []
    make = capture._context

    async def counted(slot: int, viewport: Viewport):  # noqa: ANN202 - PageCapture._context's own
        known = (slot, viewport) in capture._contexts
        context = await make(slot, viewport)
        if not known:
            context.on("page", lambda page: opened.append(page))
        return context

    capture._context = counted  # type: ignore[method-assign]
    return opened


async def test_a_slot_loads_its_pages_in_one_page_and_tells_each_shot_only_of_its_own(
        one_slot: PageCapture, site: str) -> None:
    opened = pages_opened(one_slot)
    noisy, quiet, noisy_again = await one_slot.shoot_each(
        [("s", PageTarget(name, f"{site}/{name}"), Viewport.desktop) for name in ("noisy", "quiet", "noisy")], "x")

    assert len(opened) == 1, "one page for the slot's three shots"
    assert [shot.path is not None for shot in (noisy, quiet, noisy_again)] == [True] * 3
    for shot in (noisy, noisy_again):
        assert any("noisy broke" in error for error in shot.console_errors), shot.console_errors
        assert f"404 {site}/gone.png" in shot.failed_requests
    # the noisy page's fetch of /slow is still in flight when it is shot; leaving it aborts it, for no shot
    assert quiet.console_errors == [] and quiet.failed_requests == [], (quiet.console_errors, quiet.failed_requests)
    assert noisy.failed_requests == noisy_again.failed_requests == [f"404 {site}/gone.png"]


async def test_a_page_whose_shot_failed_is_replaced_and_the_next_shot_is_whole(
        one_slot: PageCapture, site: str) -> None:
    opened = pages_opened(one_slot)
    hung, quiet = await one_slot.shoot_each(
        [("s", PageTarget(name, f"{site}/{name}"), Viewport.mobile) for name in ("hang", "quiet")], "x")

    assert hung.path is None and hung.error and f"{site}/hang" in hung.error
    assert len(opened) == 2, "the page that timed out is closed, the next shot has a new one"
    assert opened[0].is_closed()
    assert quiet.path is not None and quiet.status == 200
    assert quiet.console_errors == [] and quiet.failed_requests == []


async def test_a_slot_changing_viewport_keeps_no_page_open_at_the_other(one_slot: PageCapture, site: str) -> None:
    """A context's viewport is fixed: the slot's desktop page is closed when it goes on at mobile, so that no more
    pages are open than load at once."""
    opened = pages_opened(one_slot)
    shots = await one_slot.shoot_each([("s", PageTarget("quiet", f"{site}/quiet"), viewport)
                                       for viewport in (Viewport.desktop, Viewport.mobile, Viewport.mobile)], "x")

    assert [shot.path is not None for shot in shots] == [True] * 3
    assert len(opened) == 2 and opened[0].is_closed(), "one page per viewport, the first closed for the second"
