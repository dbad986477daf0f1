"""Render one ReportData as HTML e-mail (CSS inlined), plain text and Markdown, from the templates/ dir."""

from __future__ import annotations

import base64
import re
import secrets
from datetime import date, datetime
from functools import cache
from pathlib import Path

import css_inline
import jinja2

from fleet.model.vocabulary import MOMENT, count
from reporting.model import (
    TERM_COLORS,
    TYPE_NAMES,
    Chart,
    Picture,
    ReportData,
    image_subtype,
)
from reporting.vulnerability_section import MAX_ROWS

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#!()])")


def data_uri(image: bytes) -> str:
    """An image inline (a PNG chart or a JPEG picture), so the files open in a browser and the artifact shows
    it; the e-mail swaps it for a Content-ID (mail clients block data URIs)."""
    return f"data:image/{image_subtype(image)};base64," + base64.b64encode(image).decode("ascii")


def image_src(image: Chart | Picture) -> str:
    return data_uri(image.png if isinstance(image, Chart) else image.jpeg)


def markdown_text(value: object) -> str:
    """Literal text in Markdown: HTML is entity-escaped and Markdown syntax backslash-escaped."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def when(value: datetime | date | None) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime(MOMENT)
    return value.strftime("%d %b %Y")


def duration(data: ReportData) -> str:
    seconds = max(0, int((data.finished_at - data.started_at).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


def percent(value: float) -> str:
    return f"{100 * value:.0f}%"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md=markdown_text, when=when, percent=percent)
    env.globals.update(
        term_colors=TERM_COLORS, type_names=TYPE_NAMES, duration=duration, plural=count, image_src=image_src,
        max_rows=MAX_ROWS,
    )
    return env


class SetAside:
    """The folded rows of one HTML report, kept out of the page while its CSS is inlined and put back after: they
    carry no class, so there is nothing to inline, and css-inline's tree of a 10,000-site report's rows weighed
    about 40 MB (bench/report.py). Each is marked by a comment with this render's own token: a value from the
    dashboard is escaped text, never a comment, so it cannot stand for one."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.parts: list[str] = []

    def keep(self, html: str) -> int:
        """Set `html` aside; the template writes the comment `<!--aside:TOKEN:N-->` with the number returned."""
        self.parts.append(str(html))
        return len(self.parts) - 1

    def restore(self, html: str) -> str:
        return re.sub(rf"<!--aside:{self.token}:(\d+)-->", lambda found: self.parts[int(found[1])], html)


def render_html(data: ReportData) -> str:
    aside = SetAside()
    html = environment().get_template("report.html.j2").render(data=data, aside=aside)
    return aside.restore(css_inline.inline(html, keep_at_rules=True, load_remote_stylesheets=False))


def render_text(data: ReportData) -> str:
    return environment().get_template("report.txt.j2").render(data=data)


def render_markdown(data: ReportData) -> str:
    return environment().get_template("report.md.j2").render(data=data)
