"""The night's screenshots (`Summary.looks`) as the reports show them: which sites, pages and pictures.

The operator reads the broken and review sites with every page in that band, worst first (past 50 sites of a
band, one line each), and a count of the healthy; a client reads one before/after pair per site (the home page on
a computer, or the worst page when it is worse). Pictures are capped per e-mail so that a message stays a few
hundred kilobytes.
"""

from __future__ import annotations

from pathlib import Path

from fleet.model.summary import BAND_ORDER, Band, PageLook, SiteLook
from reporting.aggregate import clean
from reporting.model import Looks, LookView, PageView, Picture
from reporting.pictures import CLIENT_FRAME, LABELS, OPERATOR_FRAME, draw_page

MAX_PICTURED_PAGES = 8  # the operator's e-mail: pages pictured (three pictures each)
MAX_PAIRS = 6  # a client's e-mail: sites pictured (two pictures each)
MAX_PICTURE_BYTES = 1_000_000  # pictures in one e-mail (about 1.35 MB once base64-encoded): the rest are named
MAX_LISTED = 50  # sites listed with their pages per band; the rest one line each
MAX_NOTES = 2  # new failed requests and console errors named per page
HOME, DESKTOP = "home", "desktop"


def _rank(page: PageLook) -> tuple[int, float]:
    return (BAND_ORDER.index(page.band) if page.band is not None else -1, page.score or 0.0)


def client_page(look: SiteLook) -> PageLook | None:
    """The page a client sees: the home page on a computer, or the worst page when it looks worse than that."""
    home = next((p for p in look.pages if p.page == HOME and p.viewport == DESKTOP), None)
    worst = look.worst
    if home is None or home.band is None:
        return worst or home
    if worst is not None and BAND_ORDER.index(worst.band) > BAND_ORDER.index(home.band):  # type: ignore[arg-type]
        return worst
    return home


def band_pages(look: SiteLook) -> list[PageLook]:
    """The pages in the site's band, worst first."""
    return sorted((p for p in look.pages if p.band is not None and p.band == look.band), key=_rank, reverse=True)


def lean(look: SiteLook) -> SiteLook:
    """Only the pages a report can show: those in the site's band (not for a healthy one), the client's page,
    and (a site not judged) the pages that say why. A large fleet's looks are read in bounded memory."""
    keep = [] if look.band is Band.healthy else band_pages(look)
    if look.band is None:
        keep = [page for page in look.pages if page.error][:3]
    chosen = client_page(look)
    if chosen is not None and all(chosen is not page for page in keep):
        keep.append(chosen)
    return look.model_copy(update={"pages": keep})


def _page_view(page: PageLook) -> PageView:
    paths = {"before": page.before, "after": page.after, "changes": page.diff}
    notes = [*page.new_failed_requests[:MAX_NOTES], *page.new_console_errors[:MAX_NOTES]]
    return PageView(clean(page.page, 80), clean(page.viewport, 20), clean(page.url, 300), page.band, page.score,
                    {label: clean(path, 400) for label, path in paths.items() if path},
                    [clean(note, 200) for note in notes], clean(page.error, 300))  # fmt: skip


def _view(look: SiteLook, pages: list[PageLook]) -> LookView:
    return LookView(look.site_id, clean(look.site_name, 120), clean(look.site_url, 200), look.band,
                    clean(look.headline, 300), [_page_view(page) for page in pages])  # fmt: skip


def _worst_first(looks: list[SiteLook]) -> list[SiteLook]:
    def key(look: SiteLook) -> tuple[float, str]:
        return -(look.worst.score or 0.0) if look.worst else 0.0, look.site_name.casefold()

    return sorted(looks, key=key)


def operator_looks(looks: list[SiteLook], alarm_sites: list[int | None]) -> Looks:
    """Broken sites in the order of their alarms (then the rest, worst first), review sites worst first; the
    first `MAX_PICTURED_PAGES` pages in that order are pictured."""
    by_band: dict[Band | None, list[SiteLook]] = {}
    for look in looks:
        by_band.setdefault(look.band, []).append(look)
    order = {site_id: index for index, site_id in enumerate(alarm_sites)}
    broken = sorted(_worst_first(by_band.get(Band.broken, [])), key=lambda look: order.get(look.site_id, len(order)))
    review, unjudged = _worst_first(by_band.get(Band.review, [])), by_band.get(None, [])
    shown = Looks(
        broken=[_view(look, band_pages(look)) for look in broken[:MAX_LISTED]],
        review=[_view(look, band_pages(look)) for look in review[:MAX_LISTED]],
        unjudged=[_view(look, []) for look in unjudged[:MAX_LISTED]],
        healthy=len(by_band.get(Band.healthy, [])),
        sites=len(looks),
        totals={band: len(found) for band, found in by_band.items()},
        folded=[_view(look, []) for found in (broken, review, unjudged) for look in found[MAX_LISTED:]],
    )
    for view in shown.broken:
        view.alarmed = view.site_id in order
    pages = [page for view in (*shown.broken, *shown.review) for page in view.pages]
    for page in pages[:MAX_PICTURED_PAGES]:
        page.pictured = True
    shown.left_out = max(0, len(pages) - MAX_PICTURED_PAGES)
    return shown


def client_looks(looks: list[SiteLook]) -> Looks:
    """One pair per site of the client, worst first: the first `MAX_PAIRS` pictured, the rest counted."""
    chosen = [(look, page) for look in looks if (page := client_page(look)) is not None and page.band is not None]
    chosen.sort(key=lambda pair: (-_rank(pair[1])[0], pair[0].site_name.casefold()))
    pairs = [_view(look, [page]) for look, page in chosen[:MAX_PAIRS]]
    for view in pairs:
        view.pages[0].pictured = True
    return Looks(pairs=pairs, healthy=sum(1 for look in looks if look.band is Band.healthy), sites=len(looks),
                 left_out=max(0, len(chosen) - MAX_PAIRS))  # fmt: skip


def draw(looks: Looks, run_dir: Path, budget: int = MAX_PICTURE_BYTES) -> list[Picture]:
    """Draw the pictures of every pictured page (the operator's three, a client's pair), each with its
    Content-ID, until they weigh `budget` bytes: the pages after that are named, not pictured."""
    drawn: list[Picture] = []
    views = [(view, OPERATOR_FRAME, LABELS) for view in (*looks.broken, *looks.review)]
    views += [(view, CLIENT_FRAME, LABELS[:2]) for view in looks.pairs]
    pictured = [(page, frame, labels) for view, frame, labels in views for page in view.pages if page.pictured]
    for number, (page, frame, labels) in enumerate(pictured, start=1):
        if sum(len(picture.jpeg) for picture in drawn) >= budget:
            page.pictured = False
            looks.left_out += 1
            continue
        page.pictures = draw_page(run_dir, page, frame, f"look-{number}", labels)
        drawn += page.pictures
    return [picture for picture in drawn if picture.jpeg]


def artifact_rows(looks: list[SiteLook], limit: int = 200) -> list[dict[str, str]]:
    """The visual results as a table for the Prefect UI: every page of a broken or review site in that band, and
    the sites not judged, with the images' paths (relative to the run directory)."""
    rows = []
    for look in sorted(looks, key=lambda look: tuple(-n for n in _rank(look.worst)) if look.worst else (1, 0.0)):
        if look.band is Band.healthy:
            continue
        pages = band_pages(look) if look.band is not None else look.pages[:1]
        for page in pages or [None]:
            rows.append({
                "site": clean(look.site_name, 120), "url": clean(look.site_url, 200),
                "band": look.band.value if look.band is not None else "not judged",
                "score": f"{page.score:.1%}" if page is not None and page.score is not None else "",
                "page": f"{clean(page.page, 80)} ({clean(page.viewport, 20)})" if page is not None else "",
                "before": clean(page.before, 400) if page is not None else "",
                "after": clean(page.after, 400) if page is not None else "",
                "diff": clean(page.diff, 400) if page is not None else "",
                "note": clean(page.error if page is not None and page.error else look.headline, 300),
            })  # fmt: skip
    return rows[:limit]
