"""Charts drawn on the server as inline SVG: no chart library, nothing from a CDN.

Only numbers and fixed words reach the markup, so it needs no escaping beyond the
formatting of floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

WIDTH, HEIGHT = 640, 180
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 24


def _nice_ceiling(value: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``value``: round axis labels."""
    if value <= 0:
        return 1.0
    magnitude = float(10 ** (len(str(int(value))) - 1))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return value


def _ago(seconds: float, end_label: str) -> str:
    if seconds <= 0:
        return end_label
    if seconds < 120:
        return f"-{seconds:.0f} s"
    return f"-{seconds / 60:.0f} min"


def rate_chart_svg(
    *,
    series: Sequence[tuple[datetime, float]],
    target: float | None,
    window_s: float,
    end_label: str = "now",
) -> str:
    """The send rate (msg/s per bucket) as a line, the target rate as a dashed line."""
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    peak = max([rate for _, rate in series] + [target or 0.0])
    top = _nice_ceiling(peak * 1.1)

    def x(index: int) -> float:
        return PAD_LEFT + plot_w * index / max(1, len(series) - 1)

    def y(rate: float) -> float:
        return PAD_TOP + plot_h * (1 - rate / top)

    points = " ".join(f"{x(i):.1f},{y(rate):.1f}" for i, (_, rate) in enumerate(series))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'class="wb-chart" role="img" aria-label="Send rate, messages per second">',
        f'<line class="wb-axis" x1="{PAD_LEFT}" y1="{y(0):.1f}" x2="{WIDTH - PAD_RIGHT}" '
        f'y2="{y(0):.1f}"/>',
        f'<line class="wb-axis" x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{PAD_LEFT}" y2="{y(0):.1f}"/>',
        f'<text class="wb-tick" x="{PAD_LEFT - 6}" y="{PAD_TOP + 4}" '
        f'text-anchor="end">{top:g}/s</text>',
        f'<text class="wb-tick" x="{PAD_LEFT - 6}" y="{y(0):.1f}" text-anchor="end">0</text>',
    ]
    for quarter in range(5):
        tick_x = PAD_LEFT + plot_w * quarter / 4
        parts.append(
            f'<text class="wb-tick" x="{tick_x:.1f}" y="{HEIGHT - 6}" '
            f'text-anchor="middle">{_ago(window_s * (4 - quarter) / 4, end_label)}</text>'
        )
    if target:
        parts.append(
            f'<line class="wb-target" x1="{PAD_LEFT}" y1="{y(target):.1f}" '
            f'x2="{WIDTH - PAD_RIGHT}" y2="{y(target):.1f}"/>'
            f'<text class="wb-target-label" x="{WIDTH - PAD_RIGHT - 4}" y="{y(target) - 4:.1f}" '
            f'text-anchor="end">target {target:.1f}/s</text>'
        )
    if points:
        parts.append(f'<polyline class="wb-rate" points="{points}"/>')
    parts.append("</svg>")
    return "".join(parts)
