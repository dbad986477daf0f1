"""Screenshots of sites' pages in the system Chromium, driven by Playwright (its own browser download is never
used). One browser for the night, and its browser contexts made once and reused from burst to burst of shots (a
night's looks come seconds apart): one per viewport for each of the `concurrency` pages loaded at once (a context's
clock is shared by its pages, so each page in flight has its own), each with one page that loads the slot's pages one
after another: a new page is a new renderer process, about 0.5 s of CPU, and a new page per shot took twice
Chromium's CPU per shot (`bench/visual.py`). Between two shots the page goes to about:blank, so that nothing the
last page still had in flight is taken for the next page's, and it waits there between bursts, drawing nothing; a
page whose shot failed is closed and replaced. The contexts are closed once no shot was asked for `idle_close_s`
(a task worker's hours between nights). Each page is loaded to network
idle with the page's clock stopped at one fixed moment, its timers then run for one second of that clock, animations
and transitions stopped, and shot: its first two screens by default (`screens`), or the full page. So what a shot
shows does not depend on how long this machine took to load it (a carousel that turns every few seconds shows the
slide it opened with, a clock the same time), and the same page shot on another night shows the same pixels. What
went wrong on the page is kept with the shot: console errors, uncaught script errors, and same-origin requests that
failed or answered 4xx/5xx (a stylesheet gone shows here as well as in the pixels)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fleet.visual.pages import PageTarget
from fleet.visual.policy import Viewport

if TYPE_CHECKING:  # Playwright is loaded when a browser starts: a night without visual checks never pays for it
    from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, Request, Response
    from playwright.async_api import Error as PlaywrightError

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
FREEZE_CSS = ("*,*::before,*::after{animation:none!important;transition:none!important;"
              "caret-color:transparent!important;scroll-behavior:auto!important}")
PAGE_TIMEOUT_S = 60.0  # a page's load and shot: on a machine busy with other work, most of it is rendering here
LAUNCH_TIMEOUT_S = 180.0  # Chromium's start on a machine busy with other work (Playwright's own default: 30 s)
IDLE_CLOSE_S = 60.0  # the contexts of a capture that shot nothing for this long are closed (their renderers' memory)
PAGE_CLOCK = datetime(2026, 1, 1, tzinfo=UTC)  # every page's clock, on every night: a script's time is no change
TIMERS_MS = 1000  # of the page's clock run after the load: what a page's scripts set up to draw at once
_NOT_NAME = re.compile(r"[^A-Za-z0-9.-]+")


def chromium_path(candidate: str = CHROMIUM) -> str | None:
    """The Chromium to drive, or None when this machine has none."""
    return shutil.which(candidate)


@dataclass(slots=True)
class Shot:
    site: str
    page: str
    viewport: Viewport
    url: str
    path: Path | None = None  # None: no screenshot (the error says why)
    status: int | None = None
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    error: str | None = None


def shot_path(run_dir: Path, site: str, page: str, viewport: Viewport, label: str) -> Path:
    """`run_dir/<site>/<viewport>/<page>.<label>.png`: before, after and diff of a page side by side."""
    return run_dir / _NOT_NAME.sub("_", site) / viewport.value / f"{_NOT_NAME.sub('_', page)}.{label}.png"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


class PageCapture:
    """`async with PageCapture(run_dir) as capture: shots = await capture.shoot(site, pages, viewports, "before")`."""

    def __init__(self, run_dir: Path, concurrency: int = 3, executable: str = CHROMIUM,
                 timeout_s: float = PAGE_TIMEOUT_S, verify_tls: bool = True, full_page: bool = False,
                 screens: int = 2, idle_close_s: float = IDLE_CLOSE_S) -> None:
        self.run_dir = run_dir
        self.executable = executable
        self.verify_tls = verify_tls
        self.timeout_ms = timeout_s * 1000
        self.full_page, self.screens = full_page, screens
        self._free_slots = set(range(concurrency))
        self._slot_freed = asyncio.Semaphore(concurrency)
        self._contexts: dict[tuple[int, Viewport], BrowserContext] = {}
        self._pages: dict[int, tuple[Viewport, Page]] = {}  # each slot's one open page, at its viewport
        self._shooting = 0  # shoot_each calls in flight
        self.idle_close_s = idle_close_s
        self._idle_close: asyncio.TimerHandle | None = None  # closes the contexts once nothing was shot for a while
        self._background: set[asyncio.Task[None]] = set()  # closings under way, held until done
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    async def __aenter__(self) -> PageCapture:
        path = chromium_path(self.executable)
        if path is None:
            raise FileNotFoundError(f"no Chromium at {self.executable}: install Debian's `chromium` package")
        from playwright.async_api import async_playwright

        self._playwright = await async_playwright().start()
        try:
            self._browser = await self._playwright.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS),
                                                                   timeout=LAUNCH_TIMEOUT_S * 1000)
        except BaseException:
            await self._playwright.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._cancel_idle_close()
        self._contexts.clear()
        if self._browser is not None:
            await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()

    async def shoot(self, site: str, pages: list[PageTarget], viewports: list[Viewport], label: str) -> list[Shot]:
        """Every page of one site at every viewport, within the bound of pages loaded at once."""
        return await self.shoot_each([(site, page, viewport) for viewport in viewports for page in pages], label)

    async def shoot_each(self, wanted: list[tuple[str, PageTarget, Viewport]], label: str) -> list[Shot]:
        """These (site, page, viewport) shots, in this order. When the last shots in flight are taken, the slots'
        pages wait on about:blank for the next burst: a page left showing a site kept Chromium drawing while
        nothing was shot (about 5% of a core, measured), one on about:blank does not (0.04 CPU-s in 20 s for three,
        measured), and the next burst reuses them (a new context and page cost Chromium about 0.7 s of CPU, twice
        what a shot in a kept page does); `idle_close_s` later with no shot asked for, they are closed."""
        self._cancel_idle_close()
        self._shooting += 1
        try:
            return list(await asyncio.gather(*(self._shoot_page(site, page, viewport, label)
                                               for site, page, viewport in wanted)))
        finally:
            self._shooting -= 1
            if not self._shooting and self._contexts:
                self._idle_close = asyncio.get_running_loop().call_later(self.idle_close_s, self._close_when_idle)

    def _cancel_idle_close(self) -> None:
        if self._idle_close is not None:
            self._idle_close.cancel()
            self._idle_close = None

    def _close_when_idle(self) -> None:
        self._idle_close = None
        if not self._shooting:
            self._in_background(self._close_contexts())

    async def _close_contexts(self) -> None:
        """Close the contexts made so far; a shot that starts meanwhile makes new ones."""
        from playwright.async_api import Error as PlaywrightError

        contexts, self._contexts, self._pages = list(self._contexts.values()), {}, {}
        for context in contexts:
            with contextlib.suppress(PlaywrightError):  # the browser went away: its contexts went with it
                await context.close()

    async def shoot_sites(self, sites: dict[str, list[PageTarget]], viewports: list[Viewport],
                          label: str) -> list[Shot]:
        """Many sites at once, still one browser and at most `concurrency` pages loading: every site's pages at one
        viewport before the next viewport, so that a slot's page goes on at its viewport; returned site by site."""
        wanted = [(site, page, viewport) for viewport in viewports for site, pages in sites.items() for page in pages]
        shots = await self.shoot_each(wanted, label)
        order = {site: number for number, site in enumerate(sites)}
        return sorted(shots, key=lambda shot: order[shot.site])  # stable: each site's shots viewport by viewport

    async def _context(self, slot: int, viewport: Viewport) -> BrowserContext:
        """The slot's context at `viewport`, made once: its clock installed and stopped."""
        context = self._contexts.get((slot, viewport))
        if context is None:
            assert self._browser is not None, "use PageCapture as an async context manager"
            context = await self._browser.new_context(
                viewport=viewport.size, device_scale_factor=1, is_mobile=viewport.is_mobile,
                has_touch=viewport.is_mobile, reduced_motion="reduce", service_workers="block",
                ignore_https_errors=not self.verify_tls)
            context.set_default_timeout(self.timeout_ms)  # every step of a shot, not only the load
            await context.clock.install(time=PAGE_CLOCK)
            await context.clock.pause_at(PAGE_CLOCK)
            self._contexts[slot, viewport] = context
        return context

    async def _page(self, slot: int, viewport: Viewport) -> Page:
        """The slot's page at `viewport`, reused from its last shot at that viewport; one at another viewport is
        closed first (its context cannot change it), so that no more pages are open than are loading at once."""
        from playwright.async_api import Error as PlaywrightError

        held = self._pages.get(slot)
        if held is not None and held[0] is viewport and not held[1].is_closed():
            return held[1]
        if held is not None:
            del self._pages[slot]
            with contextlib.suppress(PlaywrightError):
                await held[1].close()
        page = await (await self._context(slot, viewport)).new_page()
        page.on("crash", self._forget)  # a renderer that died while its page waited: the next shot opens another
        self._pages[slot] = (viewport, page)
        return page

    def _forget(self, page: Page) -> None:
        """Let go of a crashed page and its context (whose clock can no longer be set), closed meanwhile."""
        self._pages = {slot: held for slot, held in self._pages.items() if held[1] is not page}
        for key, context in list(self._contexts.items()):
            if context is page.context:
                del self._contexts[key]
                self._in_background(context.close())

    def _in_background(self, step: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(self._quietly(step))
        self._background.add(task)  # kept until done: the loop holds only a weak reference to a task
        task.add_done_callback(self._background.discard)

    @staticmethod
    async def _quietly(step: Coroutine[Any, Any, None]) -> None:
        from playwright.async_api import Error as PlaywrightError

        with contextlib.suppress(PlaywrightError):  # the browser went away: its contexts went with it
            await step

    async def _take_slot(self, viewport: Viewport) -> int:
        """A free slot: one whose page is at `viewport` if there is one (its page is then reused), else one with no
        page (rather than close a page another viewport's shots would reuse)."""
        await self._slot_freed.acquire()

        def preference(free: int) -> tuple[int, int]:
            held = self._pages.get(free)
            return (0 if held and held[0] is viewport else 1 if held is None else 2), free

        slot = min(self._free_slots, key=preference)
        self._free_slots.discard(slot)
        return slot

    def _give_back(self, slot: int) -> None:
        self._free_slots.add(slot)
        self._slot_freed.release()

    async def _shoot_page(self, site: str, target: PageTarget, viewport: Viewport, label: str) -> Shot:
        from playwright.async_api import Error as PlaywrightError

        shot = Shot(site, target.name, viewport, target.url)
        slot = await self._take_slot(viewport)
        try:
            context = await self._context(slot, viewport)
            await context.clock.set_system_time(PAGE_CLOCK)
            page = await self._page(slot, viewport)
        except PlaywrightError as error:
            self._give_back(slot)
            shot.error = f"{target.url}: {_first_line(error)}"
            return shot
        origin = _origin(target.url)

        def on_console(message: ConsoleMessage) -> None:
            if message.type == "error":
                shot.console_errors.append(_console_error(message))

        def on_page_error(error: PlaywrightError) -> None:
            shot.console_errors.append(f"uncaught: {error}")

        def on_response(response: Response) -> None:
            if response.status >= 400 and _origin(response.url) == origin:
                shot.failed_requests.append(f"{response.status} {response.url}")

        def on_request_failed(request: Request) -> None:
            if _origin(request.url) == origin:
                shot.failed_requests.append(f"{request.failure or 'failed'} {request.url}")

        listeners = {"console": on_console, "pageerror": on_page_error, "response": on_response,
                     "requestfailed": on_request_failed}
        for event, listener in listeners.items():
            page.on(event, listener)
        failed = False
        try:
            response = await page.goto(target.url, wait_until="networkidle", timeout=self.timeout_ms)
            shot.status = response.status if response else None
            await context.clock.run_for(TIMERS_MS)
            await page.add_style_tag(content=FREEZE_CSS)
            path = shot_path(self.run_dir, site, target.name, viewport, label)
            path.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=path, animations="disabled", caret="hide", timeout=self.timeout_ms,
                                  **await self._extent(page, viewport))
            shot.path = path
        except PlaywrightError as error:
            shot.error = f"{target.url}: {_first_line(error)}"
            failed = True
        finally:
            for event, listener in listeners.items():
                page.remove_listener(event, listener)
            await self._put_back(slot, page, failed)
        return shot

    async def _put_back(self, slot: int, page: Page, failed: bool) -> None:
        """The slot free again, its page on about:blank (what the last page still had in flight is dropped with
        it, heard by no shot), or closed after a failed shot: a page that timed out or crashed is not reused."""
        from playwright.async_api import Error as PlaywrightError

        try:
            if not failed:
                try:
                    await page.goto("about:blank", timeout=self.timeout_ms)
                except PlaywrightError:
                    failed = True
            if failed:
                if slot in self._pages and self._pages[slot][1] is page:
                    del self._pages[slot]
                with contextlib.suppress(PlaywrightError):
                    await page.close()
        finally:
            self._give_back(slot)

    async def _extent(self, page: Page, viewport: Viewport) -> dict[str, Any]:
        """The screenshot's extent: the full page, or its first `screens` screens (less when it is shorter)."""
        if self.full_page:
            return {"full_page": True}
        screen = viewport.size
        if self.screens == 1:
            return {}
        tall = await page.evaluate("document.documentElement.scrollHeight")
        height = max(1, min(self.screens * screen["height"], int(tall)))
        return {"full_page": height > screen["height"],
                "clip": {"x": 0, "y": 0, "width": screen["width"], "height": height}}


def _console_error(message: ConsoleMessage) -> str:
    """The error with the address it names: Chromium's "Failed to load resource: ... 404" reads the same for any
    resource, so without it a missing stylesheet after an update passed for the favicon that was missing before."""
    url = (message.location or {}).get("url")
    return f"{message.text} ({url})" if url else message.text


def _first_line(error: PlaywrightError) -> str:
    return error.message.splitlines()[0] if error.message else type(error).__name__
