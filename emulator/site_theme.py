"""What a healthy site's pages look like in a browser: the markup of each page and the stylesheet of its theme.

A site's active theme picks one of a few looks (colours, fonts, layout of the header and the hero); a seeded
draw per site adds moving content, the kind of thing that changes between two screenshots by itself: a
carousel whose first slide the server rotates on every view (as banner rotators do; a script then moves it
on every few seconds) or a clock. A visual break (`emulator.visual_faults`) keeps the answer 200: with `css`
the page still links its stylesheet and the server answers that with 404; with `blank` the page's main
sections render empty; `notice` adds a thin bar at the foot of the window. Every value from the fleet is
escaped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape

from emulator.records import Post, Site

THEME_VERSION_FALLBACK = "1.0"


@dataclass(frozen=True, slots=True)
class Look:
    name: str
    background: str
    text: str
    accent: str
    header: str
    header_text: str
    font: str
    hero_align: str


LOOKS = {
    "block": Look("block", "#fbfaf3", "#111111", "#503aa8", "#fbfaf3", "#111111", "Georgia, 'Times New Roman', serif",
                  "left"),
    "business": Look("business", "#ffffff", "#2b2f36", "#0b6bcb", "#1d2327", "#ffffff", "Arial, Helvetica, sans-serif",
                     "center"),
    "bold": Look("bold", "#f4f1ee", "#1a1a1a", "#d6336c", "#1a1a1a", "#f4f1ee", "Verdana, Geneva, sans-serif",
                 "left"),
}
THEME_LOOKS = {
    "twentytwentyfive": "block", "twentytwentyfour": "block", "twentytwentythree": "block",
    "astra": "business", "generatepress": "business", "kadence": "business", "neve": "business",
    "oceanwp": "bold", "blocksy": "bold", "hello-elementor": "bold",
}
SLIDES = ("#e8590c", "#2f9e44", "#1971c2", "#ae3ec9", "#f08c00")
SLIDE_SECONDS = 4
EXTRA_PAGES = {"about": "About us", "contact": "Contact"}
SHOP_PAGE = ("shop", "Shop")


def active_theme(site: Site) -> tuple[str, str]:
    """(slug, version) of the site's active theme; a site without one looks like WordPress's default."""
    theme = next((t for t in site.themes.values() if t.active), None)
    return (theme.slug, theme.version) if theme else ("twentytwentyfive", THEME_VERSION_FALLBACK)


def look_of(site: Site) -> Look:
    return LOOKS[THEME_LOOKS.get(active_theme(site)[0], "block")]


def moving_content(site: Site) -> str:
    """"carousel", "clock" or "" for a site: drawn from the site's domain, the same on every render."""
    draw = random.Random(f"moving:{site.domain}").random()
    return "carousel" if draw < 0.4 else "clock" if draw < 0.6 else ""


def is_shop(site: Site) -> bool:
    return any(p.slug.split("/")[0] == "woocommerce" and p.active for p in site.plugins.values())


def page_paths(site: Site) -> dict[str, str]:
    """The site's own pages beside the home page: path (under the site's root) -> title."""
    pages = {f"{slug}/": title for slug, title in EXTRA_PAGES.items()}
    if is_shop(site):
        pages[f"{SHOP_PAGE[0]}/"] = SHOP_PAGE[1]
    return pages


def published(site: Site, post_type: str) -> list[Post]:
    return [p for p in site.posts if p.post_type == post_type and p.status == "publish"]


def stylesheet_path(site: Site) -> str:
    slug, version = active_theme(site)
    return f"wp-content/themes/{slug}/style.css?ver={version}"


def stylesheet(site: Site) -> str:
    """The active theme's `style.css`: the look's colours and layout, mobile first, one breakpoint."""
    look = look_of(site)
    slug, version = active_theme(site)
    return f"""/*
Theme Name: {slug}
Version: {version}
*/
*,*::before,*::after{{box-sizing:border-box}}
body{{margin:0;background:{look.background};color:{look.text};font:17px/1.6 {look.font}}}
a{{color:{look.accent}}}
.site-header{{background:{look.header};color:{look.header_text};padding:20px 24px;display:flex;flex-wrap:wrap;
  align-items:center;justify-content:space-between;gap:12px;border-bottom:4px solid {look.accent}}}
.site-title{{margin:0;font-size:26px;font-weight:700}}
.site-title a{{color:{look.header_text};text-decoration:none}}
.site-nav ul{{list-style:none;margin:0;padding:0;display:flex;gap:18px}}
.site-nav a{{color:{look.header_text};text-decoration:none;font-weight:600}}
.hero{{background:{look.accent};color:#fff;padding:56px 24px;text-align:{look.hero_align}}}
.hero h1{{margin:0 0 12px;font-size:40px;line-height:1.15}}
.hero .button{{display:inline-block;margin-top:16px;background:#fff;color:{look.accent};padding:12px 26px;
  border-radius:6px;font-weight:700;text-decoration:none}}
.carousel{{position:relative;height:220px;margin:28px auto 0;max-width:900px;overflow:hidden;border-radius:10px}}
.slide{{position:absolute;inset:0;display:none;align-items:center;justify-content:center;font-size:28px;
  font-weight:700;color:#fff}}
.slide.active{{display:flex}}
.clock{{display:inline-block;margin-top:20px;padding:8px 16px;background:rgba(0,0,0,.25);border-radius:6px;
  font:600 22px/1.3 'Courier New',monospace;font-variant-numeric:tabular-nums}}
.content{{max-width:1100px;margin:0 auto;padding:40px 24px}}
.features{{display:grid;grid-template-columns:1fr;gap:20px}}
.card{{background:#fff;border:1px solid rgba(0,0,0,.12);border-radius:8px;padding:22px}}
.card h3{{margin-top:0;color:{look.accent}}}
.posts article{{border-top:1px solid rgba(0,0,0,.15);padding:18px 0}}
.entry-title{{margin:0 0 6px;font-size:24px}}
.site-footer{{background:{look.header};color:{look.header_text};padding:32px 24px;text-align:center}}
.site-footer a{{color:{look.header_text}}}
@media (min-width:782px){{.features{{grid-template-columns:repeat(3,1fr)}}.hero h1{{font-size:52px}}}}
"""


def _nav(site: Site, base: str) -> str:
    links = [("", "Home"), *page_paths(site).items()]
    items = "".join(f'<li><a href="{escape(base + path)}">{escape(title)}</a></li>' for path, title in links)
    return f'<nav class="site-nav" aria-label="Main"><ul>{items}</ul></nav>'


def _moving(site: Site, view: int) -> str:
    """The site's moving content; `view` counts the page's views and picks the carousel's first slide."""
    kind = moving_content(site)
    if kind == "carousel":
        first = view % len(SLIDES)
        slides = "".join(
            f'<div class="slide{" active" if n == first else ""}" style="background:{colour}">'
            f"Offer {n + 1} of {len(SLIDES)}</div>"
            for n, colour in enumerate(SLIDES))
        script = (f"(function(){{var s=document.querySelectorAll('.carousel .slide'),i={first};"
                  "setInterval(function(){i=(i+1)%s.length;"
                  f"s.forEach(function(e,k){{e.classList.toggle('active',k===i)}})}},{SLIDE_SECONDS * 1000})}})();")
        return f'<div class="carousel" aria-live="polite">{slides}</div><script>{script}</script>'
    if kind == "clock":
        script = ("(function(){var c=document.querySelector('.clock');function tick(){"
                  "c.textContent=new Date().toISOString().slice(11,19)+' UTC'}tick();setInterval(tick,1000)})();")
        return f'<time class="clock">--:--:-- UTC</time><script>{script}</script>'
    return ""


def _body_of(site: Site, path: str, post: Post | None, view: int) -> str:
    """The main sections of one page."""
    name = escape(site.name)
    if post is not None:
        return (f'<section class="hero"><h1>{escape(post.title)}</h1></section>'
                f'<section class="content"><article class="post-{post.id} {escape(post.post_type)} status-publish">'
                f'<div class="entry-content"><p>{escape(post.content)}</p></div></article></section>')
    if path:
        title = escape(page_paths(site).get(path, "Page"))
        text = {
            "about/": f"{name} has served its customers since the day this site went live.",
            "contact/": "Write to us, or call during opening hours: we answer every message within a day.",
            "shop/": "Browse the catalogue: every item ships within two working days.",
        }.get(path, "")
        cards = "".join(f'<div class="card"><h3>{title} {n}</h3><p>{text}</p></div>' for n in (1, 2, 3))
        return (f'<section class="hero"><h1>{title}</h1></section>'
                f'<section class="content"><p>{text}</p><div class="features">{cards}</div></section>')
    features = "".join(
        f'<div class="card"><h3>{escape(heading)}</h3><p>{escape(body)}</p></div>' for heading, body in (
            ("Quality", "Made with care, checked twice, delivered on time."),
            ("Service", "Real people answer your questions, every working day."),
            ("Trust", "Thousands of customers come back every year."),
        ))
    posts = "".join(
        f'<article class="post-{p.id} post type-post status-publish"><h2 class="entry-title">{escape(p.title)}</h2>'
        f'<div class="entry-content"><p>{escape(p.content)}</p></div></article>'
        for p in published(site, "post"))
    return (f'<section class="hero"><h1>Welcome to {name}</h1><p>Everything you need, in one place.</p>'
            f'<a class="button" href="#latest">Read the latest</a>{_moving(site, view)}</section>'
            f'<section class="content"><div class="features">{features}</div></section>'
            f'<section class="content posts" id="latest"><h2>Latest news</h2>{posts}</section>')


NOTICE = ('<div class="release-notice" style="position:fixed;left:0;right:0;bottom:0;height:32px;margin:0;'
          'background:#fff3bf;color:#5c3c00;font:14px/32px sans-serif;text-align:center">'
          "We use cookies to improve your experience.</div>")


def page_html(site: Site, base: str, path: str = "", post: Post | None = None, blank: bool = False,
              view: int = 0, notice: bool = False) -> str:
    """One page of the site; `base` is the site's root as the browser reaches it (ends with `/`); `view`
    counts the views of the page. `blank`: the main sections render empty, as after a bad page-builder release."""
    name = escape(site.name)
    home = escape(site.url.rstrip("/") + "/")
    title = name if not path and post is None else f"{escape(post.title if post else page_paths(site).get(path, ''))}" \
        f" &#8211; {name}"
    main = "" if blank else _body_of(site, path, post, view)
    return (
        '<!DOCTYPE html>\n<html lang="en-US">\n<head>\n<meta charset="UTF-8" />\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1" />\n'
        f"<title>{title}</title>\n"
        f'<meta name="generator" content="WordPress {escape(site.wp_version)}" />\n'
        f'<link rel="stylesheet" id="theme-style-css" href="{escape(base + stylesheet_path(site))}" media="all" />\n'
        f'<link rel="https://api.w.org/" href="{home}wp-json/" />\n'
        f'<link rel="alternate" type="application/rss+xml" title="{name} &raquo; Feed" href="{home}feed/" />\n'
        "</head>\n"
        f'<body class="{"home " if not path and post is None else ""}wp-embed-responsive look-{look_of(site).name}">\n'
        f'<header class="site-header"><p class="site-title"><a href="{escape(base)}" rel="home">{name}</a></p>'
        f"{_nav(site, base)}</header>\n<main>{main}</main>\n"
        '<footer class="site-footer"><p>Proudly powered by '
        '<a href="https://wordpress.org" rel="nofollow">WordPress</a></p></footer>\n'
        f"{NOTICE if notice else ''}</body>\n</html>\n"
    )
