"""A tiny SVG chart library: histograms, line charts and grouped bars as inline <svg> markup.

Standard library and numpy only (matplotlib's import alone would cost the scorer 0.3 s).
Output is deterministic: fixed-precision coordinates, no generated ids. Degenerate input
(empty arrays, NaN, zero range) draws an empty or flat chart instead of raising.
"""
from __future__ import annotations

import math
from html import escape

import numpy as np

WIDTH, PLOT_HEIGHT = 520, 220
LEFT, RIGHT, BOTTOM = 68, 16, 46
CHAR = 6.6                                   # rough width of one 12px lower-case character
REFERENCE_COLOUR = "#3a3a3a"
# Okabe-Ito colours, distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9")


def colours(labels: list[str], reference: str | None = None) -> list[str]:
    """One colour per series: the reference series (the target a submission is compared
    with) dark grey, the others from the palette."""
    marked = labels.index(reference) if reference in labels else None
    others = iter(PALETTE * (len(labels) // len(PALETTE) + 1))
    return [REFERENCE_COLOUR if i == marked else next(others) for i in range(len(labels))]


def _width(text: str) -> float:
    """Estimated width of 12px text: there are no font metrics to measure it with."""
    return sum(8.4 if c.isupper() or c in "mw" else CHAR for c in text)


def _finite(values) -> np.ndarray:
    values = np.asarray(values, dtype=float).ravel()
    return values[np.isfinite(values)]


def _span(values: np.ndarray, pad_top: float = 0.0) -> tuple[float, float]:
    """Data range of the finite values; a zero or empty range is widened so it can be drawn."""
    if values.size == 0:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12 * max(1.0, abs(lo)):
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    return lo, hi + (hi - lo) * pad_top


def _drawable(limits) -> tuple[float, float]:
    """A finite range with hi > lo, whatever the caller passed."""
    lo, hi = (float(v) for v in limits)
    if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
        return lo, hi
    return _span(_finite([lo, hi]))


def _ticks(lo: float, hi: float, count: int = 6) -> tuple[list[float], int]:
    """Round tick values inside [lo, hi] and the decimals they need."""
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * 0.999)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = [first + i * step for i in range(int(math.floor((hi - first) / step + 1e-9)) + 1)]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return [0.0 if abs(t) < step * 1e-9 else t for t in ticks], decimals


def _f(value: float) -> str:
    return f"{value:.1f}"


def _text(x: float, y: float, text: str, anchor: str = "middle", extra: str = "") -> str:
    return (f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{extra}>'
            f"{escape(text)}</text>")


class _Plot:
    """Maps data to pixels and wraps a body into a titled, legended <svg>."""

    def __init__(self, title: str, legend: list[tuple[str, str, str]], x_range, y_range,
                 bottom: float = BOTTOM):
        self.title, self.legend, self.bottom = title, legend, bottom
        self.legend_at = self._layout_legend()
        self.top = 34 + 16 * (self.legend_at[-1][1] + 1 if legend else 0)
        self.x_range, self.y_range = _drawable(x_range), _drawable(y_range)

    def _layout_legend(self) -> list[tuple[float, int]]:
        """(x, row) of each legend entry: left to right, wrapping when the row is full."""
        places, x, row = [], LEFT, 0
        for label, _, _ in self.legend:
            width = 36 + _width(label)
            if x + width > WIDTH - RIGHT and x > LEFT:
                x, row = LEFT, row + 1
            places.append((x, row))
            x += width
        return places

    def x(self, value: float) -> float:
        lo, hi = self.x_range
        return LEFT + (value - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        lo, hi = self.y_range
        return self.top + PLOT_HEIGHT - (value - lo) / (hi - lo) * PLOT_HEIGHT

    def _legend_svg(self) -> list[str]:
        parts = []
        for (label, colour, style), (x, row) in zip(self.legend, self.legend_at):
            y = 42 + 16 * row
            if style == "box":
                parts.append(f'<rect x="{_f(x)}" y="{_f(y - 9)}" width="18" height="10" '
                             f'fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>')
            else:
                dash = ' stroke-dasharray="5 4"' if style == "dash" else ""
                parts.append(f'<line x1="{_f(x)}" y1="{_f(y - 4)}" x2="{_f(x + 18)}" '
                             f'y2="{_f(y - 4)}" stroke="{colour}" stroke-width="2"{dash}/>')
            parts.append(_text(x + 24, y, label, "start"))
        return parts

    def y_axis(self, ylabel: str) -> list[str]:
        ticks, decimals = _ticks(*self.y_range)
        parts = []
        for t in ticks:
            y = self.y(t)
            parts.append(f'<line x1="{LEFT}" y1="{_f(y)}" x2="{WIDTH - RIGHT}" y2="{_f(y)}" '
                         f'stroke="#e4e4e4"/>')
            parts.append(_text(LEFT - 6, y + 4, f"{t:.{decimals}f}", "end"))
        middle = self.top + PLOT_HEIGHT / 2
        parts.append(_text(13, middle, ylabel, extra=f' transform="rotate(-90 13 {_f(middle)})"'))
        return parts

    def x_axis(self, xlabel: str) -> list[str]:
        ticks, decimals = _ticks(*self.x_range)
        base = self.top + PLOT_HEIGHT
        parts = [f'<line x1="{_f(self.x(t))}" y1="{_f(base)}" x2="{_f(self.x(t))}" '
                 f'y2="{_f(base + 4)}" stroke="#555"/>' for t in ticks]
        parts += [_text(self.x(t), base + 16, f"{t:.{decimals}f}") for t in ticks]
        return parts + [_text((LEFT + WIDTH - RIGHT) / 2, base + self.bottom - 8, xlabel)]

    def svg(self, body: list[str], axes: list[str]) -> str:
        height = self.top + PLOT_HEIGHT + self.bottom
        base = self.top + PLOT_HEIGHT
        frame = (f'<path d="M{LEFT},{_f(self.top)}V{_f(base)}H{WIDTH - RIGHT}" '
                 f'stroke="#555" fill="none"/>')
        return "\n".join([
            f'<svg viewBox="0 0 {WIDTH} {_f(height)}" width="100%" style="max-width:{WIDTH}px" '
            f'role="img" aria-label="{escape(self.title)}" font-family="system-ui, sans-serif" '
            f'font-size="12" fill="#222">',
            f"<title>{escape(self.title)}</title>",
            _text(WIDTH / 2, 18, self.title, extra=' font-size="14" font-weight="600"'),
            *self._legend_svg(), *axes, *body, frame, "</svg>"])


def _no_data(plot: _Plot) -> list[str]:
    return [_text(plot.x(sum(plot.x_range) / 2), plot.y(sum(plot.y_range) / 2), "no data",
                  extra=' fill="#888"')]


def overlaid_histograms(series: list[tuple[str, np.ndarray]], bins: int, xlabel: str,
                        title: str, reference: str | None = None) -> str:
    """Density-normalised step histograms of each series on shared bins, drawn over each other."""
    data = [(label, _finite(values)) for label, values in series]
    lo, hi = _span(np.concatenate([v for _, v in data] or [np.empty(0)]))
    # Spreads are non-negative: starting the axis at 0 shows how far from certainty they are.
    edges = np.linspace(0.0 if 0 <= lo < 0.25 * hi else lo, hi, max(1, bins) + 1)
    densities = [np.histogram(v, edges, density=True)[0] if v.size else np.zeros(len(edges) - 1)
                 for _, v in data]
    peak = max((float(d.max()) for d in densities), default=0.0)
    palette = colours([label for label, _ in data], reference)
    plot = _Plot(title, [(label, c, "box") for (label, _), c in zip(data, palette)],
                 (float(edges[0]), float(edges[-1])), (0.0, peak * 1.08 if peak > 0 else 1.0))
    body = []
    for density, colour in zip(densities, palette):
        xs = np.repeat(edges, 2)[1:-1]
        points = [(plot.x(edges[0]), plot.y(0))]
        points += [(plot.x(x), plot.y(d)) for x, d in zip(xs, np.repeat(density, 2))]
        points.append((plot.x(edges[-1]), plot.y(0)))
        path = " ".join(f"{_f(px)},{_f(py)}" for px, py in points)
        body.append(f'<polygon points="{path}" fill="{colour}" fill-opacity="0.3" '
                    f'stroke="{colour}" stroke-width="1.5"/>')
    if not any(v.size for _, v in data):
        body += _no_data(plot)
    return plot.svg(body, plot.y_axis("density") + plot.x_axis(xlabel))


def line_chart(series: list[tuple[str, np.ndarray, np.ndarray]], xlabel: str, ylabel: str,
               title: str, diagonal: str | None = None, x_range=(0.0, 1.0),
               y_range=(0.0, 1.0), reference: str | None = None, connect: bool = True,
               max_markers: int | None = None) -> str:
    """Lines with markers, NaN points skipped and the line broken there; ``connect=False``
    draws the markers alone (a scatter plot); a series of more than ``max_markers`` points
    is drawn as a bare line (a curve of hundreds of points, next to a marked single point).

    `diagonal` labels a dashed y = x line (none if None).

    A range of None is taken from the data; points outside a range are clipped to its edge.
    """
    data = [(label, np.asarray(x, float).ravel(), np.asarray(y, float).ravel())
            for label, x, y in series]
    x_range = x_range or _span(np.concatenate([_finite(x) for _, x, _ in data] or [np.empty(0)]))
    y_range = y_range or _span(np.concatenate([_finite(y) for _, _, y in data] or [np.empty(0)]))
    palette = colours([label for label, _, _ in data], reference)
    legend = [(label, c, "line" if connect else "box") for (label, _, _), c in zip(data, palette)]
    legend += [(diagonal, "#888", "dash")] if diagonal else []
    plot = _Plot(title, legend, tuple(map(float, x_range)), tuple(map(float, y_range)))
    body = []
    if diagonal:
        lo, hi = max(x_range[0], y_range[0]), min(x_range[1], y_range[1])
        body.append(f'<line x1="{_f(plot.x(lo))}" y1="{_f(plot.y(lo))}" x2="{_f(plot.x(hi))}" '
                    f'y2="{_f(plot.y(hi))}" stroke="#888" stroke-dasharray="5 4"/>')
    for (_, xs, ys), colour in zip(data, palette):
        n = min(len(xs), len(ys))
        xs, ys = np.clip(xs[:n], *x_range), np.clip(ys[:n], *y_range)
        good = np.isfinite(xs) & np.isfinite(ys)
        runs, run = [], []
        for ok, x, y in zip(good, xs, ys):
            if ok:
                run.append(f"{_f(plot.x(x))},{_f(plot.y(y))}")
            elif run:
                runs, run = runs + [run], []
        for points in (runs + [run]) if connect else []:
            if len(points) > 1:
                body.append(f'<polyline points="{" ".join(points)}" fill="none" '
                            f'stroke="{colour}" stroke-width="2"/>')
        if max_markers is None or good.sum() <= max_markers:
            body += [f'<circle cx="{_f(plot.x(x))}" cy="{_f(plot.y(y))}" r="3" '
                     f'fill="{colour}"/>' for x, y in zip(xs[good], ys[good])]
    if not any(np.isfinite(x).any() for _, x, _ in data):
        body += _no_data(plot)
    return plot.svg(body, plot.y_axis(ylabel) + plot.x_axis(xlabel))


def bar_chart(categories: list[str], series: list[tuple[str, np.ndarray]], ylabel: str,
              title: str, y_range=None, error: list[np.ndarray | None] | None = None,
              reference: str | None = None) -> str:
    """Grouped bars, one group per category, optional +- error bars; NaN bars are left out."""
    values = [np.asarray(v, float).ravel() for _, v in series]
    errors = [None if e is None else np.asarray(e, float).ravel()
              for e in (error or [None] * len(series))]
    if y_range is None:
        tops = [v + np.nan_to_num(e, nan=0.0) if e is not None and e.shape == v.shape else v
                for v, e in zip(values, errors)]
        y_range = _span(np.concatenate([_finite(t) for t in tops] + [np.zeros(1)]), pad_top=0.08)
    group = (WIDTH - LEFT - RIGHT) / max(1, len(categories))
    shown = [c if len(c) <= 22 else c[:21] + "…" for c in categories]
    longest = max((_width(c) for c in shown), default=0)
    rotate = longest > group - 4
    bottom = BOTTOM + (longest * 0.6 if rotate else 0)
    palette = colours([label for label, _ in series], reference)
    plot = _Plot(title, [(label, c, "box") for (label, _), c in zip(series, palette)],
                 (0.0, float(max(1, len(categories)))), tuple(map(float, y_range)), bottom)
    width = min(group * 0.8 / max(1, len(series)), 48)
    offset = (group - width * len(series)) / 2
    zero = plot.y(min(max(0.0, y_range[0]), y_range[1]))
    body = []
    for s, (vals, errs, colour) in enumerate(zip(values, errors, palette)):
        for i, v in enumerate(vals[:len(categories)]):
            if not np.isfinite(v):
                continue
            x, y = LEFT + group * i + offset + width * s, plot.y(float(np.clip(v, *y_range)))
            body.append(f'<rect x="{_f(x)}" y="{_f(min(y, zero))}" width="{_f(width)}" '
                        f'height="{_f(abs(zero - y))}" fill="{colour}" fill-opacity="0.8">'
                        f"<title>{escape(f'{categories[i]}: {v:.4g}')}</title></rect>")
            if errs is not None and i < len(errs) and np.isfinite(errs[i]):
                lo, hi = (plot.y(float(np.clip(v + d, *y_range))) for d in (-errs[i], errs[i]))
                middle = x + width / 2
                body.append(f'<path d="M{_f(middle)},{_f(lo)}V{_f(hi)}M{_f(middle - 4)},{_f(lo)}'
                            f'h8M{_f(middle - 4)},{_f(hi)}h8" stroke="#222" fill="none"/>')
    base = plot.top + PLOT_HEIGHT
    labels = []
    for i, label in enumerate(shown):
        x = LEFT + group * (i + 0.5)
        labels.append(_text(x + 4, base + 14, label, "end",
                            f' transform="rotate(-35 {_f(x + 4)} {_f(base + 14)})"')
                      if rotate else _text(x, base + 16, label))
    return plot.svg(body, plot.y_axis(ylabel) + labels)
