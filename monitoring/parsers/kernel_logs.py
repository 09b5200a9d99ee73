"""Events from dmesg / journal / syslog lines and job logs (NCCL).

Recognised: NVRM Xid, "GPU has fallen off the bus", PCIe AER (both ``Corrected`` and
``Correctable`` spellings, ``Non-Fatal``/``Fatal``), PCIe link downgrade, NCCL watchdog
timeouts, NCCL ``NET/IB`` completion errors, NIC / QSFP link up-down and module events,
link retrain lines.  Other lines are ignored (a log is never "malformed").
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from .model import Event, Severity, ensure_utc, normalize_bus_id
from .prometheus import CRITICAL_XIDS, XID_DESCRIPTIONS

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}

_ISO_PREFIX = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"
    r"(?P<host>\S+)\s+(?P<tag>[^\s:\[]+)(?:\[\d+\])?:\s?(?P<msg>.*)$"
)
_SYSLOG_PREFIX = re.compile(
    r"^(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+(?P<day>\d{1,2})\s+"
    r"(?P<time>\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s+(?P<host>\S+)\s+(?P<tag>[^\s:\[]+)(?:\[\d+\])?:\s?(?P<msg>.*)$"
)
_DMESG_T = re.compile(
    r"^\[(?P<when>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]\s?(?P<msg>.*)$"
)
_DMESG_UPTIME = re.compile(r"^\[\s*(?P<up>\d+\.\d+)\]\s?(?P<msg>.*)$")

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)\): (?P<xid>\d+),\s*(?P<rest>.*)$")
_FELL_OFF = re.compile(
    r"NVRM: GPU (?:at )?(?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)?:?\s*"
    r"GPU has fallen off the bus"
)
_AER_RECEIVED = re.compile(
    rf"(?P<port>{_BDF}): AER: (?P<sev>Corrected|Correctable|Uncorrected|Uncorrectable)"
    r"(?: \((?P<fatal>Non-Fatal|Fatal)\))? error (?:message )?received(?::| from) "
    r"(?:id=)?(?P<src>[0-9a-fA-F:.]+)"
)
_AER_BUS = re.compile(
    rf"(?P<dev>{_BDF}): PCIe Bus Error: severity=(?P<sev>Corrected|Correctable|Uncorrected|Uncorrectable)"
    r"(?: \((?P<fatal>Non-Fatal|Fatal)\))?, type=(?P<type>[^,]+)(?:, \((?P<agent>[^)]*)\))?"
)
_DOWNGRADE = re.compile(
    rf"(?P<dev>{_BDF}): (?:(?P<avail>[\d.]+) Gb/s available PCIe bandwidth, )?limited by "
    r"(?P<speed>[\d.]+) GT/s PCIe x(?P<width>\d+) link at (?P<at>[0-9a-fA-F:.]+) "
    r"\(capable of (?:[\d.]+ Gb/s with )?(?P<cap_speed>[\d.]+) GT/s PCIe x(?P<cap_width>\d+) link\)"
)
_NCCL_WATCHDOG = re.compile(
    r"(?:\[Rank (?P<rank>\d+)\]\s*)?Watchdog caught collective operation timeout: WorkNCCL\((?P<args>.*)\) "
    r"ran for (?P<ran>\d+) milliseconds before timing out"
)
_NCCL_KV = re.compile(r"(\w+(?:\(ms\))?)=([^,()]+)")
_NCCL_NET = re.compile(
    r"^(?:(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\] NCCL WARN "
    r"(?P<msg>NET/(?:IB|Socket)\s*:.*)$"
)
_NCCL_STATUS = re.compile(r"status=(\d+)")
_NCCL_PEER = re.compile(r"peer (\S+?)(?:<(\d+)>)?\s")
_NIC_LINK = re.compile(
    rf"^(?:(?P<driver>\S+) )?(?:(?P<dev>{_BDF}) )?(?P<iface>[\w.@-]+): (?:NIC )?[Ll]ink (?:is )?"
    r"(?P<state>[Uu]p|[Dd]own|UP|DOWN)\b"
)
_MODULE = re.compile(
    rf"(?:(?P<dev>{_BDF})(?: \S+)?: )?Port module event(?:\[error\])?: "
    r"module (?P<module>\d+), Cable (?P<what>[^,]+)"
)
_RETRAIN = re.compile(r"(?i)\b(?:link\s+retrain(?:ing|ed)?|retrain(?:ing|ed)? (?:the )?link)\b")
_RANK_PREFIX = re.compile(r"\[rank(\d+)\]")

# "Xid 13, 31, 43, 45..." are mostly application faults: warning; others critical (see CRITICAL_XIDS).


def _xid_severity(xid: int) -> Severity:
    return "critical" if xid in CRITICAL_XIDS else "warning"


def _aer_severity(sev: str, fatal: str | None) -> Severity:
    if sev in ("Corrected", "Correctable"):
        return "info"
    return "critical" if fatal == "Fatal" else "warning"


def _aer_class(sev: str, fatal: str | None) -> str:
    if sev in ("Corrected", "Correctable"):
        return "correctable"
    return "fatal" if fatal == "Fatal" else "nonfatal"


def parse_log_events(
    text: str,
    *,
    node: str | None = None,
    year: int | None = None,
    ts: datetime | None = None,
    boot_time: datetime | None = None,
) -> list[Event]:
    """Events from log text.

    Timestamps: ISO (journalctl -o short-iso) and ``dmesg -T`` lines carry them; classic
    syslog lines have no year (``year``, else ``ts.year``, else the current UTC year);
    raw dmesg ``[12345.678901]`` keeps the uptime in ``data['uptime_s']`` and gets a
    timestamp only when ``boot_time`` is given.  Lines with no time at all get ``ts``.
    ``node`` defaults to the syslog/journal hostname or the NCCL ``host:pid:tid`` prefix.
    """
    ts = ensure_utc(ts)
    boot_time = ensure_utc(boot_time)
    if year is None:
        year = ts.year if ts is not None else datetime.now(UTC).year
    events: list[Event] = []
    pending_aer: dict[str, int] = {}  # source device -> index of an 'error received' event
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line:
            continue
        when, host, msg, uptime = _split_prefix(line, year, ts, boot_time)
        who = node or host
        data_base: dict[str, object] = {"line": lineno}
        if uptime is not None:
            data_base["uptime_s"] = uptime

        net = _NCCL_NET.search(msg)
        if net and net.group("host") and node is None:
            who = net.group("host")

        def emit(
            kind: str,
            card: str | None,
            severity: Severity,
            data: dict[str, object],
            _when: datetime | None = when,
            _who: str | None = who,
            _msg: str = msg,
            _base: dict[str, object] = data_base,
        ) -> int:
            events.append(Event(kind, _when, _who, card, severity, _msg.strip(), {**_base, **data}))
            return len(events) - 1

        mt = _XID.search(msg)
        if mt:
            xid = int(mt.group("xid"))
            rest = mt.group("rest")
            pid = re.search(r"pid=(\d+|'<unknown>')", rest)
            pname = re.search(r"name=([^,]+)", rest)
            emit(
                "xid",
                normalize_bus_id(mt.group("bus")),
                _xid_severity(xid),
                {
                    "xid": xid,
                    "pid": int(pid.group(1)) if pid and pid.group(1).isdigit() else None,
                    "process": pname.group(1).strip() if pname else None,
                    "description": XID_DESCRIPTIONS.get(xid),
                    "detail": rest,
                },
            )
            continue
        mt = _FELL_OFF.search(msg)
        if mt:
            emit("gpu_fell_off_bus", normalize_bus_id(mt.group("bus")), "critical", {})
            continue
        mt = _AER_RECEIVED.search(msg)
        if mt:
            src = normalize_bus_id(mt.group("src"))
            idx = emit(
                "pcie_aer",
                src,
                _aer_severity(mt.group("sev"), mt.group("fatal")),
                {
                    "class": _aer_class(mt.group("sev"), mt.group("fatal")),
                    "port": mt.group("port").lower(),
                },
            )
            if src:
                pending_aer[src] = idx
            continue
        mt = _AER_BUS.search(msg)
        if mt:
            dev = normalize_bus_id(mt.group("dev"))
            data: dict[str, object] = {
                "class": _aer_class(mt.group("sev"), mt.group("fatal")),
                "type": mt.group("type").strip(),
                "agent": mt.group("agent"),
            }
            sev = _aer_severity(mt.group("sev"), mt.group("fatal"))
            idx_or_none = pending_aer.pop(dev, None) if dev else None
            if idx_or_none is not None:  # same error as the preceding 'error received' line: merge
                prev = events[idx_or_none]
                events[idx_or_none] = replace(
                    prev, severity=sev, data={**prev.data, **data}, message=f"{prev.message} / {msg.strip()}"
                )
            else:
                emit("pcie_aer", dev, sev, data)
            continue
        mt = _DOWNGRADE.search(msg)
        if mt:
            emit(
                "pcie_downgrade",
                normalize_bus_id(mt.group("dev")),
                "warning",
                {
                    "speed_gts": float(mt.group("speed")),
                    "width": int(mt.group("width")),
                    "capable_speed_gts": float(mt.group("cap_speed")),
                    "capable_width": int(mt.group("cap_width")),
                    "limited_at": normalize_bus_id(mt.group("at")) or mt.group("at"),
                },
            )
            continue
        mt = _NCCL_WATCHDOG.search(msg)
        if mt:
            kv = dict(_NCCL_KV.findall(mt.group("args")))
            rank = mt.group("rank")
            if rank is None:
                rp = _RANK_PREFIX.search(msg)
                rank = rp.group(1) if rp else None
            emit(
                "nccl_timeout",
                None,
                "critical",
                {
                    "rank": int(rank) if rank is not None else None,
                    "seq": int(kv["SeqNum"]) if kv.get("SeqNum", "").isdigit() else None,
                    "op": kv.get("OpType"),
                    "timeout_ms": int(kv["Timeout(ms)"]) if kv.get("Timeout(ms)", "").isdigit() else None,
                    "ran_ms": int(mt.group("ran")),
                },
            )
            continue
        mt = net
        if mt:
            st = _NCCL_STATUS.search(mt.group("msg"))
            peer = _NCCL_PEER.search(mt.group("msg") + " ")
            emit(
                "nccl_net_error",
                None,
                "critical",
                {
                    "status": int(st.group(1)) if st else None,
                    "peer": peer.group(1) if peer else None,
                    "device": int(mt.group("dev")),
                    "pid": int(mt.group("pid")) if mt.group("pid") else None,
                },
            )
            continue
        mt = _MODULE.search(msg)
        if mt:
            what = mt.group("what").strip()
            plugged = what.lower() == "plugged"
            emit(
                "link_up" if plugged else "link_down",
                normalize_bus_id(mt.group("dev")),
                "info" if plugged else "warning",
                {"module": int(mt.group("module")), "cable": what},
            )
            continue
        mt = _NIC_LINK.search(msg)
        if mt:
            up = mt.group("state").lower() == "up"
            emit(
                "link_up" if up else "link_down",
                normalize_bus_id(mt.group("dev")),
                "info" if up else "warning",
                {"interface": mt.group("iface"), "driver": mt.group("driver")},
            )
            continue
        if _RETRAIN.search(msg):
            bdf = re.search(_BDF, msg)
            emit("link_retrain", normalize_bus_id(bdf.group(0)) if bdf else None, "warning", {})
    return events


def _split_prefix(
    line: str, year: int, ts: datetime | None, boot_time: datetime | None
) -> tuple[datetime | None, str | None, str, float | None]:
    """(timestamp, host, message, uptime seconds) for one line."""
    when: datetime | None = ts
    host: str | None = None
    msg = line
    mt = _ISO_PREFIX.match(line)
    if mt:
        try:
            when = ensure_utc(datetime.fromisoformat(mt.group("ts").replace(",", ".")))
        except ValueError:
            when = ts
        host, msg = mt.group("host"), mt.group("msg")
    else:
        ms = _SYSLOG_PREFIX.match(line)
        if ms:
            t = ms.group("time")
            fmt = "%H:%M:%S.%f" if "." in t else "%H:%M:%S"
            try:
                clock = datetime.strptime(t, fmt)
                when = datetime(
                    year,
                    _MONTHS[ms.group("mon")],
                    int(ms.group("day")),
                    clock.hour,
                    clock.minute,
                    clock.second,
                    clock.microsecond,
                    tzinfo=UTC,
                )
            except ValueError:
                when = ts
            host, msg = ms.group("host"), ms.group("msg")
        else:
            md = _DMESG_T.match(line)
            if md:
                try:
                    when = datetime.strptime(re.sub(r"\s+", " ", md.group("when")), "%a %b %d %H:%M:%S %Y")
                    when = when.replace(tzinfo=UTC)
                except ValueError:
                    when = ts
                msg = md.group("msg")
    uptime: float | None = None
    mu = _DMESG_UPTIME.match(msg)
    if mu:
        uptime = float(mu.group("up"))
        msg = mu.group("msg")
        if boot_time is not None and when is ts:
            when = boot_time + timedelta(seconds=uptime)
    return when, host, msg, uptime
