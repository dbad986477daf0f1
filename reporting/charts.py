"""Trend charts as PNG bytes (matplotlib, Agg backend: no display, no pyplot state, safe in worker threads)."""

from __future__ import annotations

import functools
import gc
import io
from collections.abc import Callable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fleet.model.vocabulary import Voice
from reporting.model import TERM_COLORS, BreakdownRow, PluginFailure, TrendRow

WIDTH_IN, DPI = 6.4, 150  # 960 px wide: sharp on phones when shown at 640 px
TEXT, GRID = "#3e4c59", "#e4e7eb"


def _freed_at_once(draw: Callable[..., bytes]) -> Callable[..., bytes]:
    """Free each figure as soon as its PNG is made.

    A figure is thousands of objects in reference cycles, and its texts hold the renderer's pixel buffer: left
    to the collector, dead figures pile up until a full collection (tens of MB over a few hundred reports).
    With the collector paused while drawing they all stay in the youngest generation, which one cheap
    collection then frees.
    """

    @functools.wraps(draw)
    def drawn(*args: object) -> bytes:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return draw(*args)
        finally:
            if enabled:
                gc.enable()
            gc.collect(0)

    return drawn


def _figure(height_in: float, *, left: float, bottom: float, right: float = 0.15, top: float = 0.12):
    """A figure with one axes placed by fixed margins in inches (no tight-bbox pass: it doubles the draw time)."""
    figure = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((left / WIDTH_IN, bottom / height_in, 1 - (left + right) / WIDTH_IN,
                            1 - (bottom + top) / height_in))  # fmt: skip
    _style(axes)
    return figure, axes


def _style(axes) -> None:
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    axes.spines["bottom"].set_color(GRID)
    axes.tick_params(colors=TEXT, labelsize=10, length=0)
    axes.set_axisbelow(True)


def _label(name: str) -> str:
    """A plugin name as literal text: `$` would otherwise start matplotlib's math mode."""
    short = name if len(name) <= 34 else name[:33] + "…"
    return short.replace("$", r"\$")


LEGEND_ROW_IN = 0.24  # one row of the legend at 9.5 pt


def _legend(figure: Figure, axes) -> None:
    """The legend under the chart, in as many columns as fit the picture's width (a client's words are long:
    five in a row cut "Left out on purpose" at the edge); each row beyond the first makes the picture taller,
    the chart keeping its size and place above it."""
    renderer = figure.canvas.get_renderer()
    handles, _ = axes.get_legend_handles_labels()
    for columns in range(min(5, len(handles)), 0, -1):
        legend = figure.legend(loc="lower center", ncol=columns, frameon=False, fontsize=9.5, labelcolor=TEXT,
                               handlelength=1, columnspacing=1.2, borderaxespad=0.2)
        if legend.get_window_extent(renderer).width <= figure.bbox.width - 8 or columns == 1:
            break
        legend.remove()
    extra = LEGEND_ROW_IN * (-(-len(handles) // columns) - 1)
    if extra:
        width, height = figure.get_size_inches()
        position = axes.get_position()
        figure.set_size_inches(width, height + extra)
        axes.set_position((position.x0, (position.y0 * height + extra) / (height + extra), position.width,
                           position.height * height / (height + extra)))


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", facecolor="white")
    return buffer.getvalue()


@_freed_at_once
def outcomes_per_night(trends: list[TrendRow], voice: Voice) -> bytes:
    """Stacked bars: what became of every pending update, night by night, in the report's words."""
    figure, axes = _figure(2.9, left=0.45, bottom=0.85)
    axes.grid(axis="y", color=GRID, linewidth=0.8)
    positions = range(len(trends))
    bottoms = [0] * len(trends)
    for term in voice.ordered():
        values = [voice.total(row.by_outcome, term) for row in trends]
        if not any(values):
            continue
        axes.bar(positions, values, bottom=bottoms, width=0.62, color=TERM_COLORS[term.key], label=term.title)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    axes.set_xticks(list(positions), [row.day.strftime("%d %b") for row in trends])
    axes.yaxis.get_major_locator().set_params(integer=True)
    if any(bottoms):
        _legend(figure, axes)
    return _png(figure)


@_freed_at_once
def failure_rate_per_plugin(failures: list[PluginFailure]) -> bytes:
    """Horizontal bars: share of attempted updates of each plugin that failed over the trend window."""
    ordered = list(reversed(failures))
    labels = [_label(f.name) for f in ordered]
    label_width = 0.25 + 0.078 * max(len(label) for label in labels)  # inches at 10 pt
    # the right margin holds the last tick label ("100%") and the "N of M" beside a full bar
    figure, axes = _figure(0.55 + 0.38 * len(failures), left=min(label_width, 3.0), bottom=0.4, right=0.95)
    axes.grid(axis="x", color=GRID, linewidth=0.8)
    rates = [100 * f.rate for f in ordered]
    axes.barh(range(len(ordered)), rates, height=0.6, color=TERM_COLORS["failed"])
    axes.set_yticks(range(len(ordered)), labels)
    axes.set_xlim(0, min(100, max(rates) * 1.3 + 5))
    axes.xaxis.set_major_formatter(lambda value, _: f"{value:.0f}%")
    for y, failure in enumerate(ordered):
        axes.text(100 * failure.rate, y, f"  {failure.failed} of {failure.attempted}",
                  va="center", fontsize=9.5, color=TEXT)
    return _png(figure)


@_freed_at_once
def outcomes_by_type(rows: list[BreakdownRow], voice: Voice) -> bytes:
    """Stacked horizontal bars: this night's outcomes per update type (the first night has no trend yet)."""
    shown = [row for row in reversed(rows) if row.total]
    figure, axes = _figure(0.95 + 0.42 * len(shown), left=1.35, bottom=0.75, right=0.3)
    axes.grid(axis="x", color=GRID, linewidth=0.8)
    lefts = [0] * len(shown)
    for term in voice.ordered():
        values = [voice.total(row.by_outcome, term) for row in shown]
        if not any(values):
            continue
        axes.barh(range(len(shown)), values, left=lefts, height=0.6, color=TERM_COLORS[term.key], label=term.title)
        lefts = [left + value for left, value in zip(lefts, values, strict=True)]
    axes.set_yticks(range(len(shown)), [row.label for row in shown])
    axes.xaxis.get_major_locator().set_params(integer=True)
    if any(lefts):
        _legend(figure, axes)
    return _png(figure)
