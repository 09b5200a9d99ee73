"""JSON from the outside, bounded: nesting deeper than a limit is a malformed body, never a RecursionError.

Python's decoder recurses once per level and raises RecursionError (a 500) near 1,000 levels; what
decodes just under that still crashes later code that walks it (serializers, audit snapshots, the
database driver). No body the portal takes nests more than a few levels, so anything past
MAX_DEPTH is refused with a ValueError the caller turns into a 400.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

MAX_DEPTH = 32
# \u0000 escaped in a JSON string (an odd number of backslashes before "u0000"); a raw NUL is
# already invalid JSON. PostgreSQL stores no NUL in text or jsonb: refused here, not as a 500 there.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


class TooDeep(ValueError):
    pass


class NulCharacter(ValueError):
    pass


def json_depth_check(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Raise TooDeep if lists/objects in `value` nest more than `max_depth` levels.

    Level by level, without recursion; each level is one list comprehension per container, so a
    flat batch of 1,000 sample objects costs about as little as one pass over their values.
    """
    containers = (dict, list)
    level = [value] if type(value) in containers else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise TooDeep(f"JSON nested deeper than {max_depth} levels")
        deeper: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            deeper += [c for c in children if type(c) in containers]
        level = deeper
    return value


def json_loads(raw: str | bytes, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """json.loads that raises ValueError (JSONDecodeError, TooDeep, NulCharacter) for every bad body."""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    if "\\u0000" in text and _NUL_ESCAPE.search(text):  # the regex only where an escape may be
        raise NulCharacter("JSON strings may not contain the NUL character (\\u0000)")
    raw = text
    try:
        value = json.loads(raw, **kwargs)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {max_depth} levels") from None
    return json_depth_check(value, max_depth)


# The hot shape of a telemetry body: a list of flat objects whose values are scalars or one level
# of object of scalars (labels). Decoded and shape-checked in C (msgspec): nothing in it can nest
# deeper than 3 levels, so it needs no depth walk.
_Scalar = str | int | float | bool | None
_RECORDS = msgspec.json.Decoder(list[dict[str, _Scalar | dict[str, _Scalar]]])


def json_loads_records(raw: bytes) -> Any:
    """:func:`json_loads` for a body that is usually a list of flat records (telemetry samples):
    that shape is decoded in a third of the time (no depth walk, no escaped-NUL scan unless the
    body has an escape); any other body, malformed ones included, goes through :func:`json_loads`
    and gets its answer and its error messages."""
    if b"\\u0000" not in raw:
        try:
            return _RECORDS.decode(raw)
        except msgspec.DecodeError:  # another shape (ValidationError), NaN, bad UTF-8, malformed
            pass
    return json_loads(raw)
