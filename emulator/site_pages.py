"""The child sites' own web servers: each site's public pages at `/__sites__/{domain}/...`, from the one fleet
state, so a health check after updates has something real to probe (generated domains do not resolve).

- a healthy site: 200, pages a browser can screenshot (`emulator.site_theme`): the front page titled with the
  site's name, /about/, /contact/ (and /shop/ on shops), posts and pages at `?p=ID`, the active theme's
  stylesheet, and WordPress's sitemaps (`wp-sitemap.xml`, an index of one page and one post sitemap; core
  redirects `/sitemap.xml` there). Other paths show the front page. A visual break (`emulator.visual_faults`)
  answers 200 still: the stylesheet 404s, the main sections render blank, or a notice bar appears;
- an offline site (`reachable` false): 503 with a host's "Service Unavailable" page, the closest one HTTP
  server can come to a host that is down (a real one would refuse or time out the connection);
- a site whose front end an update broke (`broken_by`): 200 with the page WordPress core's `wp_die` shows
  after a PHP fatal error ("There has been a critical error on this website."). Core answers 500 when it can,
  but a fatal raised after output started is served with 200, the case a probe must catch by its content;
- a domain that is not in the fleet: 404;
- a POST carrying `X-Fleet-Guard` is its Fleet Guard's when the guard is armed and the request verified
  (`emulator.guard`); anything else is answered as the page is (WordPress renders a POST to a page as a GET).
Suspended or disconnected sites still serve their pages: that is the dashboard's view, not the site's.
No auth and no dashboard faults: this is the public site, not the dashboard.
"""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from emulator.guard import report
from emulator.records import Site
from emulator.site_theme import page_html, page_paths, published, stylesheet, stylesheet_path
from emulator.visual_faults import visual_break

if TYPE_CHECKING:
    from emulator.services import Emulator

PREFIX = "/__sites__"
CRITICAL_ERROR = "<p>There has been a critical error on this website.</p>"
_TROUBLESHOOTING = "https://wordpress.org/documentation/article/faq-troubleshooting/"
_DIE_STYLE = (
    "html{background:#f1f1f1}body{background:#fff;border:1px solid #ccd0d4;color:#444;font-family:-apple-system,"
    "BlinkMacSystemFont,\"Segoe UI\",Roboto,Oxygen-Sans,Ubuntu,Cantarell,\"Helvetica Neue\",sans-serif;"
    "margin:2em auto;padding:1em 2em;max-width:700px;box-shadow:0 1px 1px rgba(0,0,0,.04)}"
)


def site_url_template(root_url: str) -> str:
    """Where a site's front page is served through this emulator: `{host}` is the site's domain."""
    return f"{root_url.rstrip('/')}{PREFIX}/{{host}}/"


def front_end_status(site: Site) -> str:
    """"down" (offline), "broken" (an update broke it) or "up": what a visitor of the site would see."""
    if not site.reachable:
        return "down"
    return "broken" if site.front_end_broken else "up"


def critical_error_page() -> str:
    """WordPress core's default `wp_die` page for a fatal error (WP_Fatal_Error_Handler)."""
    return (
        '<!DOCTYPE html>\n<html lang="en-US">\n<head>\n'
        '\t<meta http-equiv="Content-Type" content="text/html; charset=utf-8" />\n'
        '\t<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        "\t<meta name='robots' content='max-image-preview:large, noindex, follow' />\n"
        "\t<title>WordPress &rsaquo; Error</title>\n"
        f'\t<style type="text/css">{_DIE_STYLE}</style>\n'
        '</head>\n<body id="error-page">\n'
        f'\t<div class="wp-die-message">{CRITICAL_ERROR}<p><a href="{_TROUBLESHOOTING}">'
        "Learn more about troubleshooting WordPress.</a></p></div></body>\n</html>\n"
    )


_UNAVAILABLE = (
    "<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head>\n"
    "<body><h1>Service Unavailable</h1><p>The server is temporarily unable to service your request.</p></body>"
    "</html>\n"
)


async def site_page(request: Request) -> Response:
    emulator: Emulator = request.app.state.emulator
    domain = request.path_params["domain"]
    site = None if domain.isdigit() else emulator.state.find_site(domain)  # a domain, never a dashboard id
    if site is None:
        return HTMLResponse(f"<h1>Not Found</h1><p>No site {escape(domain)} in this fleet.</p>", 404)
    status = front_end_status(site)
    if status == "down":
        return HTMLResponse(_UNAVAILABLE, 503, headers={"Retry-After": "300"})
    if request.method == "POST" and "x-fleet-guard" in request.headers:
        envelope = emulator.guards.verified(site, await request.body())
        if envelope is not None:
            answer = emulator.guards.answer(site, envelope)
            emulator.state.save_site(site)
            return Response(report(site, envelope, answer), 200, media_type="text/plain",
                            headers={"Cache-Control": "no-store"})
        status = front_end_status(site)
    if status == "broken":
        return HTMLResponse(critical_error_page(), 500)  # WP_Fatal_Error_Handler sends it with a 500
    return site_resource(request, site)


_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
_SITEMAPS = {"wp-sitemap-posts-page-1.xml": "page", "wp-sitemap-posts-post-1.xml": "post"}
_NOT_FOUND = ("<!DOCTYPE html>\n<html><head><title>Page not found</title></head><body><h1>Nothing here</h1></body>"
              "</html>\n")


def _xml(body: str) -> Response:
    return Response('<?xml version="1.0" encoding="UTF-8"?>\n' + body, 200, media_type="application/xml")


def sitemap_index(base: str) -> str:
    entries = "".join(f"<sitemap><loc>{escape(base + name)}</loc></sitemap>" for name in _SITEMAPS)
    return f'<sitemapindex xmlns="{_SITEMAP_NS}">{entries}</sitemapindex>\n'


def sitemap(site: Site, base: str, post_type: str) -> str:
    """Core's sitemap of one post type: the home page and the site's own pages lead the page sitemap."""
    urls = [base, *(base + path for path in page_paths(site))] if post_type == "page" else []
    urls += [f"{base}?p={post.id}" for post in published(site, post_type)]
    entries = "".join(f"<url><loc>{escape(url)}</loc></url>" for url in urls)
    return f'<urlset xmlns="{_SITEMAP_NS}">{entries}</urlset>\n'


def site_resource(request: Request, site: Site) -> Response:
    """What a healthy (up) site answers for one path: a page, its stylesheet or a sitemap."""
    root = f"{PREFIX}/{request.path_params['domain']}/"
    base = f"{str(request.base_url).rstrip('/')}{root}"
    path = request.path_params.get("path", "")
    fault = visual_break(site)
    if path == "sitemap.xml":
        return RedirectResponse(base + "wp-sitemap.xml", 301)
    if path == "wp-sitemap.xml":
        return _xml(sitemap_index(base))
    if path in _SITEMAPS:
        return _xml(sitemap(site, base, _SITEMAPS[path]))
    if path.startswith("wp-content/"):
        if path == stylesheet_path(site).split("?")[0] and (fault is None or fault[0] != "css"):
            return Response(stylesheet(site), 200, media_type="text/css")
        return HTMLResponse(_NOT_FOUND, 404)
    post_id = request.query_params.get("p", "")
    post = next((p for p in site.posts if str(p.id) == post_id and p.status == "publish"), None)
    if not hasattr(request.app.state, "site_page_views"):  # views per page, for the banner rotation
        request.app.state.site_page_views = Counter()
    views: Counter[tuple[int, str, str]] = request.app.state.site_page_views
    views[site.id, path, post_id] += 1
    html = page_html(site, root, path if path in page_paths(site) else "", post,
                     blank=fault is not None and fault[0] == "blank", view=views[site.id, path, post_id],
                     notice=fault is not None and fault[0] == "notice")
    return HTMLResponse(html, 200, headers={"Link": f'<{site.url.rstrip("/")}/wp-json/>; rel="https://api.w.org/"'})


def site_page_routes() -> list[Route]:
    methods = ["GET", "HEAD", "POST"]
    return [
        Route(f"{PREFIX}/{{domain}}", site_page, methods=methods),
        Route(f"{PREFIX}/{{domain}}/{{path:path}}", site_page, methods=methods),
    ]
