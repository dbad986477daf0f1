"""The night's watch without a browser: which look a site keeps over the night, and which images stay on disk."""

from __future__ import annotations

from pathlib import Path

from fleet.engine.visual_watch import VisualWatch, worse
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Band, PageLook, SiteLook, UpdateType
from fleet.visual.policy import VisualPolicy


def test_a_site_keeps_its_worst_look_of_the_night() -> None:
    assert worse(Band.healthy, None) and not worse(None, None) and not worse(None, Band.healthy)
    assert worse(Band.broken, Band.review) and not worse(Band.healthy, Band.review)
    assert not worse(Band.review, Band.review)  # the step that first showed it stays, with the images it named


def page(run_dir: Path, site: str, name: str, band: Band) -> PageLook:
    paths = {}
    for label in ("before", "before-2", "after-plugin", "after-plugin.diff"):
        path = run_dir / "visual" / site / "desktop" / f"{name}.{label}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"png")
        paths[label] = path.relative_to(run_dir).as_posix()
    return PageLook(page=name, viewport="desktop", url=f"https://{site}/{name}", band=band, score=0.0,
                    before=paths["before"], after=paths["after-plugin"], diff=paths["after-plugin.diff"])


def test_only_the_images_a_report_shows_stay_on_disk(tmp_path: Path) -> None:
    watch = VisualWatch(VisualPolicy(), tmp_path, concurrency=1, probe_template=None)
    calm = [page(tmp_path, "1-calm", name, Band.healthy) for name in ("home", "about")]
    changed = [page(tmp_path, "2-changed", "home", Band.healthy), page(tmp_path, "2-changed", "shop", Band.review)]
    watch.looks = {
        1: SiteLook(site_id=1, site_url="https://calm/", site_name="Calm", band=Band.healthy, pages=calm,
                    step=UpdateType.plugin),
        2: SiteLook(site_id=2, site_url="https://changed/", site_name="Changed", band=Band.review, pages=changed,
                    step=UpdateType.plugin),
    }
    looks = watch.finish()
    assert [look.site_id for look in looks] == [2, 1]  # for review before healthy
    left = sorted(p.relative_to(tmp_path / "visual").as_posix() for p in (tmp_path / "visual").rglob("*.png"))
    assert left == ["1-calm/desktop/home.after-plugin.png", "1-calm/desktop/home.before.png",
                    "2-changed/desktop/home.after-plugin.png", "2-changed/desktop/home.before.png",
                    "2-changed/desktop/shop.after-plugin.diff.png", "2-changed/desktop/shop.after-plugin.png",
                    "2-changed/desktop/shop.before.png"]
    referenced = {path for look in looks for p in look.pages for path in (p.before, p.after, p.diff) if path}
    assert referenced == {f"visual/{path}" for path in left}  # nothing points at a deleted file


def test_no_watch_without_the_policys_visual_key(tmp_path: Path) -> None:
    settings = PipelineSettings()
    assert VisualWatch.for_night(None, tmp_path, settings) is None
    assert VisualWatch.for_night(VisualPolicy(enabled=False), tmp_path, settings) is None


async def test_a_browser_that_will_not_start_leaves_the_night_to_its_probes(tmp_path: Path, caplog) -> None:
    from fleet.rules.plan import SiteRecord

    watch = VisualWatch(VisualPolicy(), tmp_path, concurrency=1, probe_template=None)
    watch.capture.executable = str(tmp_path / "no-chromium")
    site = SiteRecord(id=1, url="https://shop.example/", name="Shop")
    async with watch:
        await watch.take_baselines([site], http=None)  # type: ignore[arg-type] - never reached
        assert await watch.look_after([site], UpdateType.plugin) == {}
        assert await watch.still_broken(site, UpdateType.plugin)  # the bisection switches every suspect back on
    assert watch.off and "Chromium did not start" in watch.off and not watch.baselines
    assert caplog.text.count("visual checks are off for the rest of the night") == 1
