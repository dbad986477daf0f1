"""Screenshots of sites' pages in the system Chromium, driven by Playwright (its own browser download is never
used). One browser; a browser context per site and viewport, a few at a time; each page loaded to network
idle, animations and transitions stopped, then shot full-page to a file under the run directory. What went
wrong on the page is kept with the shot: console errors, uncaught script errors, and same-origin requests that
failed or answered 4xx/5xx (a stylesheet gone shows here as well as in the pixels)."""

from __future__ import annotations

import asyncio
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, Page, Playwright, Response, async_playwright
from playwright.async_api import Error as PlaywrightError

from fleet.visual.pages import PageTarget
from fleet.visual.policy import Viewport

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
FREEZE_CSS = ("*,*::before,*::after{animation:none!important;transition:none!important;"
              "caret-color:transparent!important;scroll-behavior:auto!important}")
PAGE_TIMEOUT_S = 30.0
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
                 timeout_s: float = PAGE_TIMEOUT_S, verify_tls: bool = True) -> None:
        self.run_dir = run_dir
        self.executable = executable
        self.verify_tls = verify_tls
        self.timeout_ms = timeout_s * 1000
        self._contexts = asyncio.Semaphore(concurrency)
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    async def __aenter__(self) -> PageCapture:
        path = chromium_path(self.executable)
        if path is None:
            raise FileNotFoundError(f"no Chromium at {self.executable}: install Debian's `chromium` package")
        self._playwright = await async_playwright().start()
        try:
            self._browser = await self._playwright.chromium.launch(executable_path=path, args=list(CHROMIUM_ARGS))
        except BaseException:
            await self._playwright.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._browser is not None:
            await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()

    async def shoot(self, site: str, pages: list[PageTarget], viewports: list[Viewport], label: str) -> list[Shot]:
        """Every page of one site at every viewport; the viewports run side by side within the bound."""
        per_viewport = await asyncio.gather(*(self._shoot_viewport(site, pages, v, label) for v in viewports))
        return [shot for shots in per_viewport for shot in shots]

    async def shoot_sites(self, sites: dict[str, list[PageTarget]], viewports: list[Viewport],
                          label: str) -> list[Shot]:
        """Many sites at once, still one browser and at most `concurrency` contexts."""
        per_site = await asyncio.gather(*(self.shoot(site, pages, viewports, label) for site, pages in sites.items()))
        return [shot for shots in per_site for shot in shots]

    async def _shoot_viewport(self, site: str, pages: list[PageTarget], viewport: Viewport,
                              label: str) -> list[Shot]:
        assert self._browser is not None, "use PageCapture as an async context manager"
        async with self._contexts:
            context = await self._browser.new_context(
                viewport=viewport.size, device_scale_factor=1, is_mobile=viewport.is_mobile,
                has_touch=viewport.is_mobile, reduced_motion="reduce", service_workers="block",
                ignore_https_errors=not self.verify_tls)
            try:
                return [await self._shoot_page(context, site, page, viewport, label) for page in pages]
            finally:
                await context.close()

    async def _shoot_page(self, context: BrowserContext, site: str, target: PageTarget, viewport: Viewport,
                          label: str) -> Shot:
        shot = Shot(site, target.name, viewport, target.url)
        origin = _origin(target.url)
        page: Page = await context.new_page()

        def on_response(response: Response) -> None:
            if response.status >= 400 and _origin(response.url) == origin:
                shot.failed_requests.append(f"{response.status} {response.url}")

        page.on("console", lambda message: shot.console_errors.append(message.text)
                if message.type == "error" else None)
        page.on("pageerror", lambda error: shot.console_errors.append(f"uncaught: {error}"))
        page.on("response", on_response)
        page.on("requestfailed", lambda request: shot.failed_requests.append(
            f"{request.failure or 'failed'} {request.url}") if _origin(request.url) == origin else None)
        try:
            response = await page.goto(target.url, wait_until="networkidle", timeout=self.timeout_ms)
            shot.status = response.status if response else None
            await page.add_style_tag(content=FREEZE_CSS)
            path = shot_path(self.run_dir, site, target.name, viewport, label)
            path.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=path, full_page=True, animations="disabled", caret="hide",
                                  timeout=self.timeout_ms)
            shot.path = path
        except PlaywrightError as error:
            shot.error = f"{target.url}: {error.message.splitlines()[0] if error.message else type(error).__name__}"
        finally:
            await page.close()
        return shot
