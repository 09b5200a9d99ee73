"""What the apps plug into the live mechanism: each app's ``live.py`` registers, from its
``AppConfig.ready``, the kinds of ids it marks, how they are routed to groups, the summaries it
renders once per flush, and its websocket routes. The mechanism (push, consumers, watchdog) only
reads this registry: it imports no domain app.

Routing a flush, in order:

1. each **router** reads the batch (``{kind: ids}``) and adds ids to groups (``routes.add``) or
   attributes them to an entity whose groups it does not know (``routes.via("node", 7, "card", 3)``:
   "card 3 belongs wherever node 7 is shown");
2. each **resolver** of an entity gets every attribution made to it at once (one query for the
   whole batch) and adds the attributed ids to that entity's groups;
3. each **summary** group (the overview) gets its own event, routed and sent first, optionally
   carrying frames rendered once by the flushing process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Batch = Mapping[str, set[Any]]


class Routes:
    """The groups one flush sends to, as ``{group: {kind: {ids}}}``."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.groups: dict[str, dict[str, set[Any]]] = {}
        self._via: dict[str, dict[Any, set[tuple[str, Any]]]] = {}

    def add(self, group: str, kind: str, pk: Any) -> None:
        self.groups.setdefault(group, {}).setdefault(kind, set()).add(pk)

    def add_all(self, groups: Iterable[str], kind: str, pk: Any) -> None:
        for group in groups:
            self.add(group, kind, pk)

    def via(self, entity: str, entity_pk: Any, kind: str, pk: Any) -> None:
        """Send ``(kind, pk)`` to the groups of ``entity`` ``entity_pk`` (found by its resolver)."""
        if entity_pk is not None:
            self._via.setdefault(entity, {}).setdefault(entity_pk, set()).add((kind, pk))

    def attributed(self, entity: str) -> dict[Any, set[tuple[str, Any]]]:
        return self._via.get(entity, {})


Router = Callable[[Batch, Routes], None]
#: resolver(attributions {entity pk: {(kind, pk)}}, routes): adds them to the entity's groups
Resolver = Callable[[dict[Any, set[tuple[str, Any]]], Routes], None]


@dataclass(frozen=True)
class Summary:
    """A group whose event is routed and sent before the others (most sockets listen there).

    ``route(batch)`` gives the event's ids (``{}``: nothing for this group); ``frames(ids, seq=,
    ts=, variants=)``, if set, renders the finished websocket frames once per flush (``{variant:
    frame}``; ``variants``: only those, None: all), which the group's consumers forward instead of
    rendering. ``variants()``, if set, names a presence group per variant (``{group: variant}``)
    that the consumers of that variant join: the flush renders only the variants that some socket
    listens to."""

    group: str
    route: Callable[[Batch], dict[str, list[Any]]]
    frames: Callable[..., dict[str, str]] | None = None
    variants: Callable[[], dict[str, str]] | None = None


_kinds: list[str] = []
_routers: list[Router] = []
_resolvers: dict[str, Resolver] = {}
_summaries: dict[str, Summary] = {}
_websockets: dict[str, Any] = {}


def register(
    *,
    kinds: Iterable[str] = (),
    router: Router | None = None,
    resolvers: Mapping[str, Resolver] | None = None,
    summary: Summary | None = None,
    websockets: Mapping[str, Any] | None = None,
) -> None:
    """Called from an app's ``ready()``; calling it again with the same things is harmless."""
    for kind in kinds:
        if kind not in _kinds:
            _kinds.append(kind)
    if router is not None and router not in _routers:
        _routers.append(router)
    _resolvers.update(resolvers or {})
    if summary is not None:
        _summaries[summary.group] = summary
    _websockets.update(websockets or {})


def kinds() -> tuple[str, ...]:
    return tuple(_kinds)


def routers() -> list[Router]:
    return list(_routers)


def resolvers() -> list[tuple[str, Resolver]]:
    return list(_resolvers.items())


def summaries() -> list[Summary]:
    return list(_summaries.values())


def summary(group: str) -> Summary | None:
    return _summaries.get(group)


def websocket_routes() -> dict[str, Any]:
    """{path (as for django.urls.path): consumer class} of every app."""
    return dict(_websockets)
