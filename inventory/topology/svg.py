"""Server-side SVG of a fabric: members where the template places them, cables coloured by their state,
missing links dashed red, unreachable members outlined red. No Django, no JavaScript.

A cable the check finds right is coloured by its link telemetry when known (``link_up``: port id ->
up): green when its ends report up, red when either reports down, grey when nothing is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from inventory.topology.check import CheckResult, FabricData

COLOURS = {
    "ok": "#64748b",
    "wrong": "#c0392b",
    "extra": "#b9770e",
    "faulty": "#c0392b",
    "mismatch": "#b9770e",
    "missing": "#c0392b",
    "up": "#1e8449",
    "down": "#c0392b",
}
STEP, PAD, R = 110.0, 40.0, 18.0
LABEL_LIMIT = 96  # above this many members, draw dots without labels


def link_state(a: bool | None, b: bool | None) -> str:
    """ "down" when either end reports down, "up" when an end reports up, else "unknown"."""
    if a is False or b is False:
        return "down"
    return "up" if a or b else "unknown"


def render(data: FabricData, result: CheckResult, link_up: Mapping[int, bool] | None = None) -> str:
    labels = [m.label for m in data.members]
    raw = dict(result.layout.positions) if result.layout is not None else {}
    for i, label in enumerate(labels):  # members the template could not place go on a row below
        raw.setdefault(label, (i % 8, (max((y for _x, y in raw.values()), default=-1) + 1) + i // 8))
    if not raw:
        return ""
    xs, ys = [x for x, _ in raw.values()], [y for _, y in raw.values()]
    scale = STEP if len(labels) <= LABEL_LIMIT else STEP / 3
    pos = {k: (PAD + (x - min(xs)) * scale, PAD + (y - min(ys)) * scale) for k, (x, y) in raw.items()}
    width = PAD * 2 + (max(xs) - min(xs)) * scale
    height = PAD * 2 + (max(ys) - min(ys)) * scale
    port_member = {p.id: m.label for m in data.members for p in m.ports}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="fabric-svg" viewBox="0 0 {width:.0f} '
        f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" aria-label="Fabric topology">'
    ]
    for c in data.cables:
        a, b = port_member.get(c.a), port_member.get(c.b)
        if a is None or b is None:
            continue
        state = "faulty" if c.status == "faulty" else result.link_state.get(c.id or 0, "ok")
        link = link_state((link_up or {}).get(c.a), (link_up or {}).get(c.b))
        dash = ' stroke-dasharray="2 3"' if c.status == "planned" else ""
        colour = COLOURS[state]
        title = f"{c.label or c.id}: {state}"
        if c.status == "connected" and link != "unknown":
            title += f", link {link}"
            if state == "ok":
                colour = COLOURS[link]
        attrs = f' class="link link-{link} cable-{escape(c.status)}" data-cable="{c.id or ""}"{dash}'
        out.append(_line(pos[a], pos[b], colour, attrs, title))
    for f in result.findings:
        if f.kind == "missing_link" and len(f.members) == 2:
            out.append(
                _line(
                    pos[f.members[0]],
                    pos[f.members[1]],
                    COLOURS["missing"],
                    ' stroke-dasharray="6 4"',
                    f.message,
                )
            )
    bad = {m for f in result.findings if f.kind in ("unreachable", "port_missing") for m in f.members}
    for label in labels:
        x, y = pos[label]
        stroke = "#c0392b" if label in bad else "#1d2430"
        radius = R if len(labels) <= LABEL_LIMIT else 4
        out.append(
            f'<g><title>{escape(label)}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="#dbe7ff" '
            f'stroke="{stroke}" stroke-width="{3 if label in bad else 1.5}"/>'
        )
        if len(labels) <= LABEL_LIMIT:
            out.append(
                f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-size="12">{escape(label)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _line(a: tuple[float, float], b: tuple[float, float], colour: str, extra: str, title: str) -> str:
    return (
        f'<line x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" y2="{b[1]:.1f}" stroke="{colour}" '
        f'stroke-width="2.5"{extra}><title>{escape(title)}</title></line>'
    )
