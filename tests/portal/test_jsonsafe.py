"""portal.jsonsafe: JSON from the outside, bounded in depth and free of NUL characters."""

from __future__ import annotations

import pytest

from portal.jsonsafe import MAX_DEPTH, NulCharacter, TooDeep, json_loads


@pytest.mark.parametrize("depth", [1, MAX_DEPTH])
def test_nesting_up_to_the_limit_parses(depth: int) -> None:
    value = json_loads("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 999, 50_000])
def test_deeper_is_refused_whatever_the_decoder_would_do(depth: int) -> None:
    with pytest.raises(TooDeep, match="nested deeper than 32 levels"):
        json_loads("[" * depth + "]" * depth)


def test_mixed_objects_and_lists_count_alike() -> None:
    deep = '{"a": [' * 17 + "1" + "]}" * 17  # 34 levels
    with pytest.raises(TooDeep):
        json_loads(deep)
    assert json_loads('{"a": [{"b": [1, {"c": {}}]}]}') == {"a": [{"b": [1, {"c": {}}]}]}


@pytest.mark.parametrize("body", [r'{"a": "\u0000"}', r'["x\u0000y"]', r'{"\u0000": 1}', r'["\\\u0000"]'])
def test_an_escaped_nul_is_refused(body: str) -> None:
    with pytest.raises(NulCharacter):
        json_loads(body)


def test_an_escaped_backslash_before_u0000_is_text() -> None:
    assert json_loads(r'["\\u0000"]') == ["\\u0000"]
    assert json_loads(b'{"ok": true}') == {"ok": True}


# -- the telemetry fast path -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        b'[{"ts": "2026-12-01T10:00:00+00:00", "node": "gpu0001", "card": "", "metric": "power_w", "value": 300}]',
        b'[{"node": "gpu01", "value": 41.5, "labels": {"sensor": "Inlet", "instance": 2}, "ts": 1764583200}]',
        b'{"samples": [{"node": "gpu01", "value": 1}]}',  # the wrapped form: another shape
        b"[[1, 2], [3]]",
        b'[{"value": NaN}, {"value": 1e400}]',  # Python's decoder takes these; the service refuses them
        b'[{"big": 123456789012345678901234567890}]',
        b'[{"a": 1, "a": 2}]',
    ],
)
def test_the_records_fast_path_decodes_what_json_loads_decodes(body: bytes) -> None:
    from portal.jsonsafe import json_loads_records

    fast, slow = json_loads_records(body), json_loads(body)
    assert repr(fast) == repr(slow)  # repr: NaN != NaN


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'[{"a": "\\u0000"}]', NulCharacter),
        (b"[" * 40 + b"]" * 40, TooDeep),
        (b'[{"a": {"b": {"c": {}}}}]', None),  # deeper than the fast shape, within the limit
        (b'[{"a": ', ValueError),
        (b'[{"a": "\xff"}]', ValueError),
    ],
)
def test_the_records_fast_path_refuses_what_json_loads_refuses(body: bytes, error: type | None) -> None:
    from portal.jsonsafe import json_loads_records

    if error is None:
        assert json_loads_records(body) == json_loads(body)
    else:
        with pytest.raises(error):
            json_loads_records(body)
