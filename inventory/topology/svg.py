"""Server-side SVG of a fabric: members where the template places them, cables coloured by their state,
missing links dashed red, unreachable members outlined red. No Django, no JavaScript.

A cable the check finds right is coloured by its link telemetry when known (``link_up``: port id ->
up): green when its ends report up, red when either reports down, grey when nothing is known; a
connected cable whose link is down is red whatever the check says of it.

The drawing scales to its members: each member is a box as large as its label and its ports need;
every cable leaves its own port on the side of the box that faces the other end (ports on a side in
the order of their peers, so parallel rails fan out instead of lying on top of each other), and each
port's name is written inside the box at the cable's end (both ends of every cable are labelled,
and no label lies on a cable). Above LABEL_LIMIT members they are dots.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape

from inventory.topology.check import CheckResult, FabricData
from inventory.topology.templates import natural_key

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
LABEL_LIMIT = 96  # above this many members, draw dots without labels
CHAR_W, PORT_CHAR_W = 8.0, 6.2  # text widths (px per character) at the member and port font sizes
BOX_H, BOX_PAD, PORT_GAP = 26.0, 10.0, 13.0
GAP_X, GAP_Y = 70.0, 110.0  # px between neighbouring boxes
SMALL = 4  # members up to which the gaps are larger
MAX_ROW_W = 1100.0  # px: a wider row of members wraps (the page is ~1200 px wide)
DOT_STEP, DOT_R = 36.0, 4.0
MARGIN = 12.0


def link_state(a: bool | None, b: bool | None) -> str:
    """ "down" when either end reports down, "up" when an end reports up, else "unknown"."""
    if a is False or b is False:
        return "down"
    return "up" if a or b else "unknown"


@dataclass
class _Box:
    label: str
    grid: tuple[float, float]
    display: str = ""  # shown under the label when it says more ("rig01/A")
    ends: dict[str, list[tuple[int, str, str]]] = field(default_factory=lambda: defaultdict(list))
    band: dict[str, float] = field(default_factory=dict)  # side -> depth of its port names inside the box
    w: float = 0.0
    h: float = BOX_H
    x: float = 0.0  # centre, px
    y: float = 0.0

    def side_of(self, peer: tuple[float, float]) -> str:
        """A peer in another row is reached through the top or bottom, one in the same row sideways."""
        dx, dy = peer[0] - self.grid[0], peer[1] - self.grid[1]
        if abs(dy) > 1e-6:
            return "bottom" if dy > 0 else "top"
        return "right" if dx >= 0 else "left"

    def anchor(self, port: int) -> tuple[float, float]:
        """Where a port's cable leaves the box: spread along its side, clear of the other sides' names."""
        left, top = self.x - self.w / 2, self.y - self.h / 2
        for side, ends in self.ends.items():
            for i, (pid, _name, _peer) in enumerate(ends):
                if pid != port:
                    continue
                f = (i + 1) / (len(ends) + 1)
                if side in ("top", "bottom"):
                    x0, x1 = left + self.band["left"], left + self.w - self.band["right"]
                    return x0 + f * (x1 - x0), top + (self.h if side == "bottom" else 0)
                y0, y1 = top + self.band["top"], top + self.h - self.band["bottom"]
                return left + (self.w if side == "right" else 0), y0 + f * (y1 - y0)
        return self.x, self.y


def _direction(box: _Box, peer: _Box, side: str) -> float:
    """Where along ``side`` the cable to ``peer`` should leave: by its angle (top, bottom), by the
    peer's height (left, right)."""
    dx, dy = peer.x - box.x, peer.y - box.y
    if side == "bottom":
        return -math.atan2(dy, dx)
    if side == "top":
        return math.atan2(dy, dx)
    return peer.y


def _label_len(ends: list[tuple[int, str, str]]) -> float:
    return max((len(name) for _p, name, _m in ends), default=0) * PORT_CHAR_W + 6 if ends else 0.0


def render(data: FabricData, result: CheckResult, link_up: Mapping[int, bool] | None = None) -> str:
    labels = [m.label for m in data.members]
    raw = dict(result.layout.positions) if result.layout is not None else {}
    for i, label in enumerate(labels):  # members the template could not place go on a row below
        raw.setdefault(label, (i % 8, (max((y for _x, y in raw.values()), default=-1) + 1) + i // 8))
    if not raw:
        return ""
    compact = len(labels) > LABEL_LIMIT
    display = {m.label: m.display for m in data.members}
    boxes = {
        label: _Box(label, raw[label], display[label] if display.get(label) not in ("", label) else "")
        for label in labels
    }
    port_member = {p.id: m.label for m in data.members for p in m.ports}
    port_name = {p.id: p.name for m in data.members for p in m.ports}
    cables = [c for c in data.cables if c.a in port_member and c.b in port_member]
    for c in cables:
        for here, there in ((c.a, c.b), (c.b, c.a)):
            box = boxes[port_member[here]]
            peer = raw[port_member[there]]
            box.ends[box.side_of(peer)].append((here, port_name[here], port_member[there]))
    for box in boxes.values():
        _size(box, compact)
    _place(boxes, compact)
    for box in boxes.values():  # the ports of a side in the order their cables leave it: no crossings
        for side, ends in box.ends.items():
            ends.sort(key=lambda e: (_direction(box, boxes[e[2]], side), natural_key(e[1])))
    xs = [v for b in boxes.values() for v in (b.x - b.w / 2, b.x + b.w / 2)]
    ys = [v for b in boxes.values() for v in (b.y - b.h / 2, b.y + b.h / 2)]
    margin = DOT_STEP / 2 if compact else MARGIN
    left, top = min(xs) - margin, min(ys) - margin
    width, height = max(xs) - min(xs) + 2 * margin, max(ys) - min(ys) + 2 * margin
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="fabric-svg" viewBox="{left:.0f} {top:.0f} '
        f'{width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" aria-label="Fabric topology">'
    ]
    for c in cables:
        a, b = boxes[port_member[c.a]], boxes[port_member[c.b]]
        pa, pb = (a.x, a.y) if compact else a.anchor(c.a), (b.x, b.y) if compact else b.anchor(c.b)
        state = "faulty" if c.status == "faulty" else result.link_state.get(c.id or 0, "ok")
        link = link_state((link_up or {}).get(c.a), (link_up or {}).get(c.b))
        dash = ' stroke-dasharray="2 3"' if c.status == "planned" else ""
        colour = COLOURS[state]
        title = f"{c.label or c.id}: {a.label} {port_name[c.a]} – {b.label} {port_name[c.b]}, {state}"
        if c.status == "connected" and link != "unknown":
            title += f", link {link}"
            if state == "ok" or link == "down":  # a link that is down is the news, even on an extra cable
                colour = COLOURS[link]
        attrs = f' class="link link-{link} cable-{escape(c.status)}" data-cable="{c.id or ""}"{dash}'
        out.append(_line(pa, pb, colour, attrs, title, 1.5 if compact else 2))
    for f in result.findings:
        if f.kind == "missing_link" and len(f.members) == 2 and all(m in boxes for m in f.members):
            a, b = boxes[f.members[0]], boxes[f.members[1]]
            out.append(
                _line((a.x, a.y), (b.x, b.y), COLOURS["missing"], ' stroke-dasharray="6 4"', f.message, 2)
            )
    bad = {m for f in result.findings if f.kind in ("unreachable", "port_missing") for m in f.members}
    display = {m.label: m.display for m in data.members}
    for label in labels:
        box = boxes[label]
        stroke, wide = ("#c0392b", 3) if label in bad else ("#1d2430", 1.5)
        name = escape(
            f"{label} · {display[label]}" if display.get(label) and display[label] != label else label
        )
        if compact:
            shape = (
                f'<circle cx="{box.x:.1f}" cy="{box.y:.1f}" r="{DOT_R}" fill="#dbe7ff" stroke="{stroke}"/>'
            )
        else:
            shape = _box(box, stroke, wide)
        out.append(f'<g class="member"><title>{name}</title>{shape}</g>')
    out.append("</svg>")
    return "".join(out)


def _size(box: _Box, compact: bool) -> None:
    """The label (and display) in the middle, each side's port names in a band inside that side."""
    if compact:
        box.w = box.h = 2 * DOT_R
        return
    n = {side: len(box.ends.get(side, ())) for side in ("top", "bottom", "left", "right")}
    box.band = {side: _label_len(box.ends.get(side, [])) for side in n}
    text_w = max(len(box.label) * CHAR_W, len(box.display) * PORT_CHAR_W) + 2 * BOX_PAD
    text_h = BOX_H + (14 if box.display else 0)
    box.w = (
        box.band["left"]
        + box.band["right"]
        + max(text_w, (n["top"] + 1) * PORT_GAP, (n["bottom"] + 1) * PORT_GAP)
    )
    box.h = (
        box.band["top"]
        + box.band["bottom"]
        + max(text_h, (n["left"] + 1) * PORT_GAP, (n["right"] + 1) * PORT_GAP)
    )


def _box(box: _Box, stroke: str, wide: float) -> str:
    left, top = box.x - box.w / 2, box.y - box.h / 2
    band = box.band
    cx = left + band["left"] + (box.w - band["left"] - band["right"]) / 2
    cy = top + band["top"] + (box.h - band["top"] - band["bottom"]) / 2 - (7 if box.display else 0)
    parts = [
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="5" fill="#dbe7ff" '
        f'stroke="{stroke}" stroke-width="{wide}"/>',
        f'<text x="{cx:.1f}" y="{cy + 4.5:.1f}" text-anchor="middle" font-size="13" font-weight="600">'
        f"{escape(box.label)}</text>",
    ]
    if box.display:
        parts.append(
            f'<text x="{cx:.1f}" y="{cy + 19:.1f}" text-anchor="middle" font-size="10" fill="#475569">'
            f"{escape(box.display)}</text>"
        )
    for side, ends in box.ends.items():
        for pid, name, _peer in ends:
            x, y = box.anchor(pid)
            if side == "top":  # written downwards from the edge (rotated), as on a patch panel
                pos = f'x="{x:.1f}" y="{y + 3:.1f}" text-anchor="end" transform="rotate(-90 {x:.1f} {y + 3:.1f})"'
            elif side == "bottom":
                pos = f'x="{x:.1f}" y="{y - 3:.1f}" text-anchor="start" transform="rotate(-90 {x:.1f} {y - 3:.1f})"'
            elif side == "left":
                pos = f'x="{x + 3:.1f}" y="{y:.1f}" text-anchor="start"'
            else:
                pos = f'x="{x - 3:.1f}" y="{y:.1f}" text-anchor="end"'
            parts.append(
                f'<text class="port-label" {pos} dy="3.5" font-size="10" fill="#334155">{escape(name)}</text>'
            )
    return "".join(parts)


def _place(boxes: Mapping[str, _Box], compact: bool) -> None:
    """Grid units to px: one unit is the widest (tallest) box plus a gap, so no two boxes touch; a
    few members (a rig's cards) get longer cables, which read better than a drawing in one corner."""
    few = len(boxes) <= SMALL
    gap = DOT_STEP if compact else GAP_X * (2 if few else 1)
    step_x = max(b.w for b in boxes.values()) + gap
    step_y = max(b.h for b in boxes.values()) + (DOT_STEP if compact else GAP_Y * (1.3 if few else 1))
    if any(not float(b.grid[1]).is_integer() for b in boxes.values()):  # a circle (ring), not a grid:
        step_x = step_y = max(step_x, step_y) * max(1.0, len(boxes) / 6)  # neighbours ~one step apart
    # rows of a star hold few wide boxes (a switch with all the rails): space its hosts by their own width
    for box in boxes.values():
        box.x, box.y = box.grid[0] * step_x, box.grid[1] * step_y
    by_row: dict[float, list[_Box]] = defaultdict(list)
    for box in boxes.values():
        by_row[box.grid[1]].append(box)
    widest_row = max(by_row.values(), key=len)
    if len(widest_row) > 1:
        narrow = max(b.w for b in widest_row) + gap
        if narrow < step_x:
            for box in boxes.values():
                box.x = box.grid[0] * narrow
    # a wide box (a switch) must not overlap its row neighbours: push the rows apart where needed
    for row in by_row.values():
        row.sort(key=lambda b: b.x)
        for left, right in zip(row, row[1:], strict=False):
            need = (left.w + right.w) / 2 + gap
            if right.x - left.x < need:
                shift = need - (right.x - left.x)
                for b in row[row.index(right) :]:
                    b.x += shift
    if not compact:
        _wrap_rows(by_row, gap, step_y)


def _wrap_rows(by_row: Mapping[float, list[_Box]], gap: float, step_y: float) -> None:
    """A grid row wider than MAX_ROW_W (32 hosts of a star in a line) wraps onto further lines,
    centred under the drawing, so the labels stay readable instead of the page shrinking them."""
    centre = sum(b.x for row in by_row.values() for b in row) / sum(len(row) for row in by_row.values())
    shift_y = 0.0
    for key in sorted(by_row):
        row = sorted(by_row[key], key=lambda b: b.x)
        for b in row:
            b.y += shift_y
        if row[-1].x + row[-1].w / 2 - (row[0].x - row[0].w / 2) <= MAX_ROW_W:
            continue
        lines: list[list[_Box]] = [[]]
        width = 0.0
        for b in row:
            if lines[-1] and width + b.w > MAX_ROW_W:
                lines.append([])
                width = 0.0
            lines[-1].append(b)
            width += b.w + gap
        for i, line in enumerate(lines):
            x = centre - (sum(b.w for b in line) + gap * (len(line) - 1)) / 2
            for b in line:
                b.x, b.y = x + b.w / 2, b.y + i * step_y
                x += b.w + gap
        shift_y += (len(lines) - 1) * step_y


def _line(
    a: tuple[float, float], b: tuple[float, float], colour: str, extra: str, title: str, width: float
) -> str:
    return (
        f'<line x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" y2="{b[1]:.1f}" stroke="{colour}" '
        f'stroke-width="{width}"{extra}><title>{escape(title)}</title></line>'
    )
