"""Vendor-neutral result types shared by every parser.

Everything here is plain Python (no Django): parsers are pure functions from text to a
:class:`ParseResult`.  A single bad value never aborts a parse; it becomes a
:class:`ParseProblem` and the rest of the row is kept.  :class:`ParseError` is raised only
when the input as a whole cannot be understood (not XML, not JSON, garbage).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

Labels = tuple[tuple[str, str], ...]
Severity = Literal["info", "warning", "critical"]

SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")


def make_labels(pairs: Mapping[str, object] | Iterable[tuple[str, object]] | None = None) -> Labels:
    """Sorted tuple of (key, value) string pairs; ``None`` values are dropped."""
    if pairs is None:
        return ()
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple(sorted((str(k), str(v)) for k, v in items if v is not None))


@dataclass(frozen=True, slots=True)
class Sample:
    """One numeric reading in canonical units (see :mod:`monitoring.parsers.metrics`)."""

    metric: str
    value: float
    unit: str
    ts: datetime | None = None
    node: str | None = None
    card: str | None = None
    labels: Labels = ()

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened (an Xid, a link going down, an AER error...)."""

    kind: str
    ts: datetime | None
    node: str | None
    card: str | None
    severity: Severity
    message: str
    data: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParseProblem:
    """A value or line that could not be understood; the parse went on without it."""

    line: int | None
    field: str | None
    raw: str
    reason: str


@dataclass(frozen=True, slots=True)
class ParseWarning:
    """Something the parser left out on purpose (not an error): ``code`` says what.

    Codes: ``unknown_field`` (a column the portal does not read), ``duplicate_field`` (a column
    giving a value an earlier column already gave), ``no_card_id`` (no index/uuid/pci.bus_id
    column: cards keyed by row order).
    """

    code: str
    field: str | None = None


@dataclass(frozen=True, slots=True)
class CardIdentity:
    """What a parser learnt about one accelerator (GPU or Tenstorrent chip).

    ``card`` is the key used in :attr:`Sample.card` for this accelerator.
    ``firmware`` holds (component, version) pairs as reported by the tool.
    """

    card: str
    vendor: str
    uuid: str | None = None
    bus_id: str | None = None
    index: int | None = None
    name: str | None = None
    serial: str | None = None
    board_type: str | None = None
    board_id: str | None = None
    firmware: Labels = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    vbios_version: str | None = None
    node: str | None = None


@dataclass(slots=True)
class ParseResult:
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    problems: list[ParseProblem] = field(default_factory=list)
    cards: list[CardIdentity] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)

    def extend(self, other: ParseResult) -> None:
        self.samples.extend(other.samples)
        self.events.extend(other.events)
        self.problems.extend(other.problems)
        self.cards.extend(other.cards)
        self.warnings.extend(other.warnings)

    def find(self, metric: str, card: str | None = None, **labels: str) -> list[Sample]:
        """Samples of ``metric`` (optionally for one card / with given label values)."""
        out = []
        for s in self.samples:
            if s.metric != metric or (card is not None and s.card != card):
                continue
            if all(s.label(k) == v for k, v in labels.items()):
                out.append(s)
        return out

    def value(self, metric: str, card: str | None = None, **labels: str) -> float | None:
        """The value of the single matching sample, ``None`` if there is none.

        Raises ``LookupError`` when more than one sample matches.
        """
        found = self.find(metric, card, **labels)
        if not found:
            return None
        if len(found) > 1:
            raise LookupError(f"{len(found)} samples match {metric} card={card} labels={labels}")
        return found[0].value


class ParseError(ValueError):
    """The input as a whole could not be parsed.  ``line`` is 1-based (or ``None``)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        self.reason = message
        super().__init__(f"line {line}: {message}" if line is not None else message)


_BUS_RE = re.compile(
    r"^(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"(?:\.(?P<fn>[0-7]))?$"
)


def normalize_bus_id(raw: str | None) -> str | None:
    """``00000000:3B:00.0`` / ``0000:3b:00.0`` / ``3b:00.0`` / ``0000:3b:00`` -> ``0000:3b:00.0``.

    Returns ``None`` for missing markers (``N/A``...) and anything that is not a PCI address.
    """
    if raw is None:
        return None
    text = raw.strip()
    if text.upper().startswith("PCI:"):
        text = text[4:]
    m = _BUS_RE.match(text)
    if not m:
        return None
    dom = int(m.group("dom") or "0", 16)
    if dom > 0xFFFF:
        return None
    return "{:04x}:{:02x}:{:02x}.{}".format(
        dom, int(m.group("bus"), 16), int(m.group("dev"), 16), m.group("fn") or "0"
    )


def line_of(text: str, pos: int) -> int:
    """1-based line number of character offset ``pos`` in ``text``."""
    return text.count("\n", 0, max(0, pos)) + 1


def ensure_utc(ts: datetime | None) -> datetime | None:
    """Naive datetimes are taken as UTC."""
    if ts is not None and ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts
