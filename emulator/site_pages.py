"""The child sites' own web servers: each site's public pages at `/__sites__/{domain}/...`, from the one fleet
state, so a health check after updates has something real to probe (generated domains do not resolve).

- a healthy site: 200, a small WordPress-looking front page titled with the site's name;
- an offline site (`reachable` false): 503 with a host's "Service Unavailable" page, the closest one HTTP
  server can come to a host that is down (a real one would refuse or time out the connection);
- a site whose front end an update broke (`broken_by`): 200 with the page WordPress core's `wp_die` shows
  after a PHP fatal error ("There has been a critical error on this website."). Core answers 500 when it can,
  but a fatal raised after output started is served with 200, the case a probe must catch by its content;
- a domain that is not in the fleet: 404.
Suspended or disconnected sites still serve their pages: that is the dashboard's view, not the site's.
No auth and no dashboard faults: this is the public site, not the dashboard.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from emulator.records import Site

if TYPE_CHECKING:
    from emulator.app import Emulator

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
    return "broken" if site.broken_by else "up"


def front_page(site: Site) -> str:
    name = escape(site.name)
    home = escape(site.url.rstrip("/") + "/")
    posts = "".join(
        f'<article class="post-{p.id} {p.post_type} type-{p.post_type} status-publish">'
        f'<h2 class="entry-title">{escape(p.title)}</h2><div class="entry-content"><p>{escape(p.content)}</p></div>'
        "</article>"
        for p in site.posts
        if p.post_type == "post" and p.status == "publish"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en-US">\n<head>\n<meta charset="UTF-8" />\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1" />\n'
        f"<title>{name}</title>\n"
        f'<meta name="generator" content="WordPress {escape(site.wp_version)}" />\n'
        f'<link rel="https://api.w.org/" href="{home}wp-json/" />\n'
        f'<link rel="alternate" type="application/rss+xml" title="{name} &raquo; Feed" href="{home}feed/" />\n'
        "</head>\n"
        '<body class="home blog wp-embed-responsive">\n<div class="wp-site-blocks">\n'
        f'<header class="wp-block-template-part"><p class="wp-block-site-title"><a href="{home}" rel="home">'
        f"{name}</a></p></header>\n<main>{posts}</main>\n"
        '<footer class="wp-block-template-part"><p>Proudly powered by '
        '<a href="https://wordpress.org" rel="nofollow">WordPress</a></p></footer>\n'
        "</div>\n</body>\n</html>\n"
    )


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
    if status == "broken":
        return HTMLResponse(critical_error_page(), 200)
    return HTMLResponse(front_page(site), 200, headers={"Link": f'<{site.url.rstrip("/")}/wp-json/>; rel="https://api.w.org/"'})


def site_page_routes() -> list[Route]:
    methods = ["GET", "HEAD"]
    return [
        Route(f"{PREFIX}/{{domain}}", site_page, methods=methods),
        Route(f"{PREFIX}/{{domain}}/{{path:path}}", site_page, methods=methods),
    ]
