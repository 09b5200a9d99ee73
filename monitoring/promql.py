"""A small client for the Prometheus HTTP query API (Prometheus, Thanos, Mimir, VictoriaMetrics
answer the same ``/api/v1/query`` and ``/api/v1/query_range``), and the PromQL the portal asks.

No Django here: the Prometheus source (``monitoring.prometheus_source``) gives it the server's
settings. Every failure is a :class:`PromError` that says whether the server could not be reached
(``unreachable``: down, timed out, TLS refused) or answered something else than data (``bad_answer``).
"""

from __future__ import annotations

import base64
import json
import math
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

MAX_POINTS = 11_000  # what Prometheus itself allows per series and query_range
_ERROR_BODY = 300


class PromError(Exception):
    def __init__(self, kind: Literal["unreachable", "bad_answer"], message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class PromServer:
    url: str
    auth: str = "none"  # none | bearer | basic
    username: str = ""
    secret: str = ""
    verify_tls: bool = True
    ca_cert: str = ""  # PEM; empty: the system's authorities
    timeout_s: float = 10.0


@dataclass(frozen=True)
class PromSeries:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (epoch seconds, value)


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def selector(name: str, matchers: dict[str, str], regex: dict[str, str] | None = None) -> str:
    parts = [f"{k}={quote(v)}" for k, v in matchers.items()]
    parts += [f"{k}=~{quote(v)}" for k, v in (regex or {}).items()]
    return f"{name}{{{','.join(parts)}}}"


def host_regex(*names: str) -> str:
    """Matches any of ``names`` as a label value, with or without a ``:port`` (an ``instance``)."""
    alternatives = "|".join(re.escape(n) for n in dict.fromkeys(n for n in names if n))
    return f"({alternatives})(:[0-9]+)?"


def bounded_step(start: datetime, end: datetime, step: float, max_points: int = MAX_POINTS) -> int:
    """``step`` (seconds), raised so that [start, end] holds at most ``max_points`` points."""
    span = (end - start).total_seconds()
    return max(1, math.ceil(step), math.ceil(span / max_points))


def tls_context(ca_cert: str = "", *, verify: bool = True) -> ssl.SSLContext:
    """The client's TLS settings: the system's authorities or ``ca_cert`` (PEM); ssl.SSLError when
    the PEM does not load."""
    ctx = ssl.create_default_context(cadata=ca_cert or None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class PromClient:
    def __init__(self, server: PromServer) -> None:
        self.server = server
        self._ssl: ssl.SSLContext | None = None
        self._ssl_error = ""
        if server.url.startswith("https:"):
            try:
                self._ssl = tls_context(server.ca_cert, verify=server.verify_tls)
            except (ssl.SSLError, ValueError) as exc:
                self._ssl_error = f"the CA certificate cannot be read: {exc}"

    def _headers(self) -> dict[str, str]:
        s = self.server
        headers = {"Accept": "application/json", "User-Agent": "rackpilot"}
        if s.auth == "bearer":
            headers["Authorization"] = f"Bearer {s.secret}"
        elif s.auth == "basic":
            token = base64.b64encode(f"{s.username}:{s.secret}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        return headers

    def _get(self, path: str, params: dict[str, str]) -> Any:
        if self._ssl_error:
            raise PromError("unreachable", self._ssl_error)
        url = self.server.url.rstrip("/") + path
        body = urllib.parse.urlencode(params).encode()
        headers = {**self._headers(), "Content-Type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.server.timeout_s, context=self._ssl) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = _error_text(exc.read())
            if exc.code in (401, 403):
                said = f" ({detail})" if detail else ""
                raise PromError("bad_answer", f"{exc.code}: the server refused the credentials{said}")
            kind: Literal["unreachable", "bad_answer"] = "unreachable" if exc.code >= 500 else "bad_answer"
            raise PromError(kind, f"{exc.code} {detail or exc.reason}")
        except (urllib.error.URLError, TimeoutError, ConnectionError, ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)  # "Connection refused", not "[Errno 111] Connection refused"
            raise PromError(
                "unreachable", getattr(reason, "strerror", None) or str(reason) or type(exc).__name__
            )
        try:
            answer = json.loads(raw)
        except ValueError:
            raise PromError("bad_answer", "the answer is not JSON: not a Prometheus query API?")
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise PromError("bad_answer", _error_text(raw) or "no data in the answer")
        return answer.get("data")

    def query_range(self, promql: str, start: datetime, end: datetime, step: int) -> list[PromSeries]:
        data = self._get(
            "/api/v1/query_range",
            {
                "query": promql,
                "start": f"{start.timestamp():.3f}",
                "end": f"{end.timestamp():.3f}",
                "step": str(step),
            },
        )
        return _matrix(data)

    def query(self, promql: str, at: datetime | None = None) -> list[PromSeries]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        data = self._get("/api/v1/query", params)
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PromError("bad_answer", "expected an instant vector")
        out = []
        for item in data.get("result", []):
            ts, value = item["value"]
            out.append(PromSeries(dict(item["metric"]), [(float(ts), float(value))]))
        return out


def _matrix(data: Any) -> list[PromSeries]:
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PromError("bad_answer", "expected a range vector (matrix)")
    try:
        return [
            PromSeries(dict(item["metric"]), [(float(t), float(v)) for t, v in item["values"]])
            for item in data.get("result", [])
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise PromError("bad_answer", f"malformed matrix: {exc}")


def _error_text(raw: bytes) -> str:
    try:
        answer = json.loads(raw)
        if isinstance(answer, dict) and answer.get("error"):
            return str(answer["error"])[:_ERROR_BODY]
    except ValueError:
        pass
    return raw[:_ERROR_BODY].decode("utf-8", "replace").strip()


def aggregated(selectors: Iterable[tuple[str, float]], window_s: int) -> str:
    """min, avg and max over each step's window of the union of the (selector, scale) pairs, as one
    query whose series carry an ``agg`` label (one round trip instead of three)."""
    pairs = list(selectors)

    def over(fn: str, sel: str, scale: float) -> str:
        expr = f"{fn}_over_time({sel}[{window_s}s])"
        return expr if scale == 1 else f"({expr} * {scale!r})"

    return " or ".join(
        f'label_replace({" or ".join(over(fn, sel, scale) for sel, scale in pairs)}, "agg", "{fn}", "", "")'
        for fn in ("min", "avg", "max")
    )
