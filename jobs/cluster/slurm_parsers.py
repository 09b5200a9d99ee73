"""Pure functions turning Slurm output into jobs.cluster types.

They absorb Slurm 22.05 (data version v0.0.38) and the newer shapes v0.0.39-v0.0.42:
state strings vs lists, plain numbers vs ``{"set","infinite","number"}``, ``meta.Slurm`` vs
``meta.slurm``, old and new error objects. Unknown or missing values become None; a document
that is not what the command prints raises :class:`SlurmOutputError` (a ValueError).
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import msgspec

from .errors import SlurmOutputError, SlurmReportedError
from .types import FINISHED_JOB_STATES, JobInfo, NodeInfo, PartitionInfo, SacctRecord

JsonInput = str | bytes | Mapping[str, Any]
T = TypeVar("T")

_NODE_BASE_STATES = frozenset(
    {"idle", "mixed", "allocated", "down", "completing", "future", "unknown", "error", "planned", "reboot"}
)
_JOB_BASE_STATES = frozenset(
    FINISHED_JOB_STATES
    | {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "STOPPED"}
)


# ---------------------------------------------------------------------------- helpers


_decode = msgspec.json.Decoder().decode
_decode_top = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_list = msgspec.json.Decoder(list[msgspec.Raw]).decode


def _loads(data: str | bytes | msgspec.Raw) -> Any:
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return json.loads(bytes(data) if isinstance(data, msgspec.Raw) else data)


def load_json(data: JsonInput, *, raw_key: str | None = None) -> Mapping[str, Any]:
    """Decode a JSON document (or pass a mapping through); it must be an object.

    msgspec decodes to the same plain dicts, lists and scalars as :func:`json.loads`, in about
    half its time (a 10,000-job squeue listing: 12 ms instead of 27 ms); what it refuses and
    Python's decoder accepts (numbers past 64 bits or a float's range, ``NaN``) goes to the latter.
    ``raw_key``: that member (a listing's records) is left as its JSON text (``msgspec.Raw``), for
    :func:`_records` to take apart record by record (see :class:`RecordMemo`).
    """
    if isinstance(data, Mapping):
        return data
    try:
        if raw_key is None:
            doc = _loads(data)
        else:
            try:
                top = _decode_top(data)
            except msgspec.DecodeError:
                top = json.loads(data)
            if isinstance(top, dict):
                doc = {k: v if k == raw_key else _loads(v) for k, v in top.items()}
            else:
                doc = top
    except (ValueError, TypeError) as exc:
        raise SlurmOutputError(f"Slurm output is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SlurmOutputError("Slurm JSON output is not an object")
    return doc


class RecordMemo(Generic[T]):
    """The records of the previous listing, each by its exact JSON text, with what it was
    parsed into.

    Parsing a record is a pure function of its text, so a record whose text is the same as in
    the previous listing takes the previous result instead of being decoded and parsed again:
    of a 10,000-job listing with 1 % changed, 100 records are parsed. It holds one listing (the
    last one parsed), as bytes (which the garbage collector does not walk).
    """

    def __init__(self) -> None:
        self._last: dict[bytes, T] = {}

    def parse(self, records: Iterable[Any], parse: Callable[[Mapping[str, Any]], T]) -> list[T]:
        """``records``: raw JSON texts (``msgspec.Raw``) or already decoded objects (parsed as they are)."""
        last = self._last
        kept: dict[bytes, T] = {}
        out: list[T] = []
        for record in records:
            if not isinstance(record, msgspec.Raw):
                out.append(parse(_record(record)))
                continue
            text = bytes(record)
            value = last.get(text)
            if value is None:
                value = parse(_record(_loads(text)))
            kept[text] = value
            out.append(value)
        self._last = kept
        return out


@dataclass
class ListingMemo:
    """What a backend keeps between the listings of one cluster (see :class:`RecordMemo`)."""

    jobs: RecordMemo[JobInfo] = field(default_factory=RecordMemo)
    nodes: RecordMemo[NodeInfo] = field(default_factory=RecordMemo)


def slurm_number(value: Any) -> int | None:
    """A plain int (v0.0.38) or ``{"set","infinite","number"}`` (v0.0.39+) -> int.

    Unset, infinite, missing or unparseable -> None.
    """
    if type(value) is int:  # the common cases first (a bool is not ``int`` here)
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    if isinstance(value, Mapping):
        if value.get("infinite") is True or value.get("set") is False:
            return None
        return slurm_number(value.get("number"))
    return None


def slurm_timestamp(value: Any) -> datetime | None:
    """Epoch seconds (plain or number object) -> aware UTC datetime; 0/unset -> None."""
    n = slurm_number(value)
    if n is None or n <= 0:
        return None
    try:
        return datetime.fromtimestamp(n, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if type(value) is str:
        return value or None
    if isinstance(value, str):
        return value if value != "" else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _state_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def slurm_version(doc: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """``meta.Slurm.version`` (22.05/23.02, ints) or ``meta.slurm.version`` (23.11+, strings)."""
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        return None
    slurm = meta.get("Slurm") or meta.get("slurm")
    if not isinstance(slurm, Mapping):
        return None
    version = slurm.get("version")
    if not isinstance(version, Mapping):
        return None
    parts = [slurm_number(version.get(k)) for k in ("major", "minor", "micro")]
    if any(p is None for p in parts):
        return None
    major, minor, micro = parts
    assert major is not None and minor is not None and micro is not None
    return (major, minor, micro)


def _messages(doc: Mapping[str, Any], key: str) -> list[str]:
    out: list[str] = []
    items = doc.get(key)
    if not isinstance(items, list):
        return out
    for e in items:
        if isinstance(e, Mapping):
            parts = [str(e[k]) for k in ("description", "error") if isinstance(e.get(k), str) and e.get(k)]
            number = e.get("error_number", e.get("errno"))
            text = ": ".join(dict.fromkeys(parts)) or (f"error {number}" if number is not None else "")
            out.append(text or f"{key[:-1]} without a message")
        elif isinstance(e, str):
            out.append(e)
    return out


def slurm_errors(doc: Mapping[str, Any]) -> list[str]:
    """Error texts from ``errors``: ``{error, error_number}``, ``{error, errno}`` (22.05 sinfo) or
    ``{description, error, source, ...}``."""
    return _messages(doc, "errors")


def slurm_warnings(doc: Mapping[str, Any]) -> list[str]:
    """Warning texts from ``warnings`` (same shapes as errors); they do not make a document wrong."""
    return _messages(doc, "warnings")


def slurm_error_numbers(doc: Mapping[str, Any]) -> list[int]:
    """Slurm error numbers of ``errors`` (``error_number`` or ``errno``; -1 = "Unspecified error")."""
    errors = doc.get("errors")
    out: list[int] = []
    for e in errors if isinstance(errors, list) else ():
        number = slurm_number(e.get("error_number", e.get("errno"))) if isinstance(e, Mapping) else None
        if number is not None:
            out.append(number)
    return out


def check_errors(doc: Mapping[str, Any]) -> None:
    """Raise :class:`SlurmReportedError` when the document carries any error, whatever else it holds.

    Slurm 22.05 prints ``"errors": [...]`` beside an EMPTY ``nodes``/``jobs`` list (exit status 0)
    when slurmctld cannot be reached: the list must not be believed.
    """
    errors = doc.get("errors")
    if errors is None or errors == []:
        return
    texts = slurm_errors(doc) or [f"unexpected 'errors' value {errors!r:.80}"]
    raise SlurmReportedError(
        "Slurm reported: " + "; ".join(texts), errors=texts, error_numbers=slurm_error_numbers(doc)
    )


def _listing(doc: Mapping[str, Any], key: str) -> list[Any]:
    """The records of a listing: decoded objects, or their JSON texts when ``key`` was loaded raw."""
    check_errors(doc)
    items = doc.get(key)
    if items is None:
        raise SlurmOutputError(f"Slurm JSON output has no {key!r} list")
    if isinstance(items, msgspec.Raw):
        try:
            items = _decode_list(items)
        except msgspec.DecodeError:
            raise SlurmOutputError(f"Slurm JSON {key!r} is not a list") from None
    if not isinstance(items, list):
        raise SlurmOutputError(f"Slurm JSON {key!r} is not a list")
    return items


def _record(item: Any) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise SlurmOutputError("Slurm JSON listing contains non-objects")
    return item


def _records(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = _listing(doc, key)
    out = [i for i in items if isinstance(i, Mapping)]
    if len(out) != len(items):
        raise SlurmOutputError(f"Slurm JSON {key!r} contains non-objects")
    return out


_GRES_RE = re.compile(r"^(?:gres[:/])?gpu(?::(?P<type>[^:=(),]+))?[:=](?P<count>\d+)")


def parse_gres(text: Any) -> tuple[int, str | None]:
    """``gpu:fake:4``, ``gpu:4(S:0-1)``, ``gres:gpu:2``, ``gres/gpu=2``, lists joined by ','
    -> (GPU count, first GPU type). Non-GPU gres are ignored."""
    if not isinstance(text, str) or not text or text in ("(null)", "N/A"):
        return (0, None)
    total = 0
    gtype: str | None = None
    items = text.split(",") if "(" not in text else _split_outside_parens(text)
    for it in items:
        m = _GRES_RE.match(it.strip())
        if not m:
            continue
        total += int(m.group("count"))
        if gtype is None and m.group("type"):
            gtype = m.group("type")
    return (total, gtype)


def _split_outside_parens(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    depth = 0
    item = ""
    items: list[str] = []
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        if c == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += c
    items.append(item)
    return items


def _tres_value(tres: Any, key: str) -> int | None:
    """``cpu=4,mem=100M,gres/gpu=2`` -> value of key (int) or None."""
    if not isinstance(tres, str):
        return None
    for part in tres.split(","):
        k, _, v = part.partition("=")
        if k == key:
            try:
                return int(v)
            except ValueError:
                return None
    return None


def decode_wait_status(status: int | None) -> int | None:
    """Raw wait status (Slurm's ``exit_code``) -> exit status; killed by signal N -> 128+N."""
    if status is None or status < 0:
        return None
    sig = status & 0x7F
    if sig == 0:
        return (status >> 8) & 0xFF
    if sig == 0x7F:  # stopped
        return None
    return 128 + sig


def _job_exit_code(value: Any) -> int | None:
    """v0.0.38: raw int. v0.0.39: number object (raw). v0.0.40+: verbose object
    ``{"status":[...], "return_code": num, "signal": {"id": num, ...}}``."""
    if isinstance(value, Mapping) and ("return_code" in value or "status" in value):
        status = _state_list(value.get("status"))
        signal = value.get("signal")
        sig_id = slurm_number(signal.get("id")) if isinstance(signal, Mapping) else None
        if "SIGNALED" in status and sig_id:
            return 128 + sig_id
        return slurm_number(value.get("return_code"))
    return decode_wait_status(slurm_number(value))


_PATTERN_RE = re.compile(r"%(\d*)([%AabjJNnstux])")


def expand_output_pattern(
    pattern: str,
    *,
    job_id: int,
    name: str | None,
    user: str | None,
    first_node: str | None,
    work_dir: str | None,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
) -> str:
    """Expand sbatch's %j %x %u %N %A %a %% in an output path; make it absolute against
    work_dir. Patterns that cannot be known are left as they are."""

    def repl(m: re.Match[str]) -> str:
        width, code = m.group(1), m.group(2)
        value: str | None
        if code == "%":
            return "%"
        if code in ("j", "J"):
            value = str(job_id)
        elif code == "x":
            value = name
        elif code == "u":
            value = user
        elif code == "N":
            value = first_node
        elif code == "A":
            value = str(array_job_id if array_job_id else job_id)
        elif code == "a":
            value = str(array_task_id) if array_task_id is not None else None
        else:
            value = None
        if value is None:
            return m.group(0)
        return value.zfill(int(width)) if width and value.isdigit() else value

    path = _PATTERN_RE.sub(repl, pattern) if "%" in pattern else pattern
    if work_dir and not path.startswith("/"):
        path = posixpath.join(work_dir, path)
    return path


def _first_node(nodes: str | None) -> str | None:
    """First host of a hostlist: ``node[1-3],gpu5`` -> ``node1``."""
    if not nodes:
        return None
    m = re.match(r"([^,\[]+)(?:\[(\d+)[^\]]*\])?", nodes)
    if not m:
        return None
    return m.group(1) + (m.group(2) or "")


def _base_job_state(value: Any) -> tuple[str, list[str]]:
    states = [s.upper() for s in _state_list(value)]
    if not states:
        return ("UNKNOWN", [])
    base = next((s for s in states if s in _JOB_BASE_STATES), states[0])
    return (base, [s for s in states if s != base])


# ---------------------------------------------------------------------------- squeue


def _array_fields(job_id: Any, task_id: Any, tasks: Any) -> dict[str, Any]:
    """JobInfo's array fields from squeue's ``array_job_id``/``array_task_id``/``array_task_string``
    or sacct's ``array.job_id``/``task_id``/``task``: ints (v0.0.38; job id 0 = no array) or
    ``{"set","infinite","number"}`` (v0.0.39+; unset = no task)."""
    array_job_id = slurm_number(job_id)
    if not array_job_id or array_job_id < 0:
        return {}
    task = slurm_number(task_id)
    if task is not None and task < 0:
        task = None
    pending = _str(tasks) if task is None else None
    return {"array_job_id": array_job_id, "array_task_id": task, "array_tasks": pending or None}


def _job_from_json(j: Mapping[str, Any]) -> JobInfo:
    job_id = slurm_number(j.get("job_id"))
    if job_id is None:
        raise SlurmOutputError("job record without job_id")
    state, _flags = _base_job_state(j.get("job_state"))
    name = _str(j.get("name")) or ""
    user = _str(j.get("user_name"))
    nodes = _str(j.get("nodes")) or ""
    node_count = slurm_number(j.get("node_count"))
    finished = state in FINISHED_JOB_STATES

    gpus, gtype = parse_gres(j.get("tres_per_node"))
    if not gpus:
        per_job, jtype = parse_gres(j.get("tres_per_job"))
        if per_job:
            gpus = per_job // max(1, node_count or 1)
            gtype = gtype or jtype
    if not gpus:
        alloc = _tres_value(j.get("tres_alloc_str"), "gres/gpu")
        if alloc:
            gpus = alloc // max(1, node_count or 1)

    cpus = slurm_number(j.get("cpus"))
    if cpus is None:
        cpus = _tres_value(j.get("tres_req_str"), "cpu")

    work_dir = _str(j.get("current_working_directory"))
    stdout = _str(j.get("standard_output"))
    batch = j.get("batch_flag")
    if stdout is None and batch is not False:
        array_task = slurm_number(j.get("array_task_id"))
        stdout = "slurm-%A_%a.out" if array_task is not None else "slurm-%j.out"
    stdout_path = None
    if stdout is not None:
        stdout_path = expand_output_pattern(
            stdout,
            job_id=job_id,
            name=name,
            user=user,
            first_node=_str(j.get("batch_host")) or _first_node(nodes),
            work_dir=work_dir,
            array_job_id=slurm_number(j.get("array_job_id")) or None,
            array_task_id=slurm_number(j.get("array_task_id")),
        )

    reason = _str(j.get("state_reason"))
    if reason == "None":
        reason = None
    return JobInfo(
        job_id=job_id,
        name=name,
        user=user,
        state=state,
        account=_str(j.get("account")),
        partition=_str(j.get("partition")),
        state_reason=reason,
        nodes=nodes,
        node_count=node_count,
        gpus=gpus,
        gpu_type=gtype,
        cpus=cpus,
        submit_time=slurm_timestamp(j.get("submit_time")),
        start_time=slurm_timestamp(j.get("start_time")) if state != "PENDING" else None,
        end_time=slurm_timestamp(j.get("end_time")) if finished else None,
        time_limit_minutes=slurm_number(j.get("time_limit")),
        # a job that never got nodes (refused, cancelled while pending) has no exit status
        exit_code=_job_exit_code(j.get("exit_code")) if finished and nodes else None,
        stdout_path=stdout_path,
        work_dir=work_dir,
        comment=_str(j.get("comment")),
        **_array_fields(j.get("array_job_id"), j.get("array_task_id"), j.get("array_task_string")),
    )


def parse_squeue_json(data: JsonInput, *, memo: RecordMemo[JobInfo] | None = None) -> list[JobInfo]:
    """``squeue --json`` (v0.0.38-v0.0.42) -> jobs, unfiltered (22.05 ignores filters).

    With ``memo`` (kept between listings of one cluster), records equal to the previous
    listing's are not parsed again."""
    records = _listing(load_json(data, raw_key="jobs"), "jobs")
    return (memo or RecordMemo()).parse(records, _job_from_json)


# ---------------------------------------------------------------------------- sinfo / nodes


def _node_state(value: Any, flags_value: Any) -> tuple[str, frozenset[str]]:
    states = _state_list(value)
    flags = {f.upper() for f in _state_list(flags_value)}
    base: str | None = None
    for s in states:
        low = s.lower()
        if base is None and low in _NODE_BASE_STATES:
            base = low
        else:
            flags.add(s.upper())
    if base is None:
        base = states[0].lower() if states else "unknown"
        flags.discard(base.upper())
    if base == "alloc":
        base = "allocated"
    if base == "mix":
        base = "mixed"
    return (base, frozenset(flags))


def _node_from_json(n: Mapping[str, Any]) -> NodeInfo:
    name = _str(n.get("name"))
    if name is None:
        raise SlurmOutputError("node record without name")
    state, flags = _node_state(n.get("state"), n.get("state_flags"))
    gpus_total, gtype = parse_gres(n.get("gres"))
    gpus_used, utype = parse_gres(n.get("gres_used"))
    reason_by = n.get("reason_set_by_user")
    parts = n.get("partitions")
    return NodeInfo(
        name=name,
        state=state,
        flags=flags,
        reason=_str(n.get("reason")),
        reason_set_by=_str(reason_by),
        reason_changed_at=slurm_timestamp(n.get("reason_changed_at")),
        cpus=slurm_number(n.get("cpus")),
        cpus_alloc=slurm_number(n.get("alloc_cpus")),
        memory_mb=slurm_number(n.get("real_memory")),
        gpus_total=gpus_total,
        gpus_used=gpus_used,
        gpu_type=gtype or utype,
        partitions=tuple(p for p in parts if isinstance(p, str)) if isinstance(parts, list) else (),
        boot_time=slurm_timestamp(n.get("boot_time")),
    )


def _nodes_from_sinfo_groups(groups: list[Mapping[str, Any]]) -> list[NodeInfo]:
    """v0.0.40+ ``sinfo --json``: ``sinfo`` is a list of groups of identical nodes."""
    by_name: dict[str, NodeInfo] = {}
    parts_by_name: dict[str, list[str]] = {}
    for g in groups:
        node = g.get("node") if isinstance(g.get("node"), Mapping) else {}
        nodes = g.get("nodes") if isinstance(g.get("nodes"), Mapping) else {}
        assert isinstance(node, Mapping) and isinstance(nodes, Mapping)
        names = nodes.get("nodes") or nodes.get("names") or []
        if not isinstance(names, list):
            continue
        state, flags = _node_state(node.get("state"), None)
        gres = g.get("gres") if isinstance(g.get("gres"), Mapping) else {}
        assert isinstance(gres, Mapping)
        gt, gtype = parse_gres(gres.get("total"))
        gu, _ = parse_gres(gres.get("used"))
        reason = g.get("reason") if isinstance(g.get("reason"), Mapping) else {}
        assert isinstance(reason, Mapping)
        cpus = g.get("cpus") if isinstance(g.get("cpus"), Mapping) else {}
        assert isinstance(cpus, Mapping)
        memory = g.get("memory") if isinstance(g.get("memory"), Mapping) else {}
        assert isinstance(memory, Mapping)
        partition = g.get("partition") if isinstance(g.get("partition"), Mapping) else {}
        assert isinstance(partition, Mapping)
        pname = _str(partition.get("name"))
        for nm in names:
            if not isinstance(nm, str):
                continue
            if pname:
                parts_by_name.setdefault(nm, [])
                if pname not in parts_by_name[nm]:
                    parts_by_name[nm].append(pname)
            by_name[nm] = NodeInfo(
                name=nm,
                state=state,
                flags=flags,
                reason=_str(reason.get("description")),
                reason_set_by=_str(reason.get("user")),
                reason_changed_at=slurm_timestamp(reason.get("time")),
                cpus=slurm_number(cpus.get("maximum")),
                cpus_alloc=slurm_number(cpus.get("allocated")),
                memory_mb=slurm_number(memory.get("maximum")),
                gpus_total=gt,
                gpus_used=gu,
                gpu_type=gtype,
            )
    return [
        NodeInfo(**{**n.__dict__, "partitions": tuple(parts_by_name.get(n.name, ()))})
        for n in by_name.values()
    ]


def parse_sinfo_json(data: JsonInput, *, memo: RecordMemo[NodeInfo] | None = None) -> list[NodeInfo]:
    """``sinfo --json`` / ``scontrol show node --json`` (v0.0.38-v0.0.42) -> nodes, one per name.

    ``memo``: as in :func:`parse_squeue_json` (for the ``nodes`` shape; the grouped ``sinfo``
    shape of v0.0.40+ is always parsed)."""
    doc = load_json(data, raw_key="nodes")
    check_errors(doc)
    if "nodes" not in doc and isinstance(doc.get("sinfo"), list):
        return _nodes_from_sinfo_groups([g for g in doc["sinfo"] if isinstance(g, Mapping)])
    seen: dict[str, NodeInfo] = {}
    for node in (memo or RecordMemo()).parse(_listing(doc, "nodes"), _node_from_json):
        seen.setdefault(node.name, node)
    return list(seen.values())


# ---------------------------------------------------------------------------- sacct


def parse_sacct_json(data: JsonInput) -> list[JobInfo]:
    """``sacct --json`` -> jobs. NB: 22.05 reports non-zero exits as 0 here; prefer
    :func:`parse_sacct_parsable` for exit codes."""
    doc = load_json(data)
    out: list[JobInfo] = []
    for j in _records(doc, "jobs"):
        job_id = slurm_number(j.get("job_id"))
        if job_id is None:
            raise SlurmOutputError("sacct job record without job_id")
        st = j.get("state") if isinstance(j.get("state"), Mapping) else {}
        tm = j.get("time") if isinstance(j.get("time"), Mapping) else {}
        assert isinstance(st, Mapping) and isinstance(tm, Mapping)
        state, _ = _base_job_state(st.get("current"))
        reason = _str(st.get("reason"))
        gpus = 0
        gtype: str | None = None
        node_count: int | None = None
        cpus: int | None = None
        tres = j.get("tres") if isinstance(j.get("tres"), Mapping) else {}
        assert isinstance(tres, Mapping)
        alloc = tres.get("allocated")
        if isinstance(alloc, list):
            for t in alloc:
                if not isinstance(t, Mapping):
                    continue
                if t.get("type") == "gres" and str(t.get("name", "")).startswith("gpu"):
                    gpus += slurm_number(t.get("count")) or 0
                    nm = str(t.get("name"))
                    if ":" in nm:
                        gtype = nm.split(":", 1)[1]
                elif t.get("type") == "node":
                    node_count = slurm_number(t.get("count"))
                elif t.get("type") == "cpu":
                    cpus = slurm_number(t.get("count"))
        if node_count:
            gpus //= node_count
        finished = state in FINISHED_JOB_STATES
        limit = tm.get("limit")
        array = j.get("array") if isinstance(j.get("array"), Mapping) else {}
        assert isinstance(array, Mapping)
        out.append(
            JobInfo(
                job_id=job_id,
                name=_str(j.get("name")) or "",
                user=_str(j.get("user")),
                state=state,
                account=_str(j.get("account")),
                partition=_str(j.get("partition")),
                state_reason=None if reason == "None" else reason,
                nodes=_str(j.get("nodes")) or "",
                node_count=node_count,
                gpus=gpus,
                gpu_type=gtype,
                cpus=cpus,
                submit_time=slurm_timestamp(tm.get("submission")),
                start_time=slurm_timestamp(tm.get("start")),
                end_time=slurm_timestamp(tm.get("end")) if finished else None,
                time_limit_minutes=slurm_number(limit),
                exit_code=_job_exit_code(j.get("exit_code")) if finished else None,
                work_dir=_str(j.get("working_directory")),
                comment=_str((j.get("comment") or {}).get("job"))
                if isinstance(j.get("comment"), Mapping)
                else _str(j.get("comment")),
                **_array_fields(array.get("job_id"), array.get("task_id"), array.get("task")),
            )
        )
    return out


def parse_sacct_parsable(text: str) -> list[SacctRecord]:
    """``sacct --parsable2 -o JobID,State,ExitCode`` (with or without the header line)."""
    out: list[SacctRecord] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        fields = line.split("|")
        if len(fields) < 3:
            raise SlurmOutputError(f"unexpected sacct line: {line!r}")
        jid, state, code = fields[0], fields[1], fields[2]
        if jid == "JobID":
            continue
        main, _, step = jid.partition(".")
        main = main.split("_", 1)[0].split("+", 1)[0]
        try:
            job_id = int(main)
        except ValueError:
            raise SlurmOutputError(f"unexpected sacct job id: {jid!r}") from None
        exit_code: int | None = None
        signal: int | None = None
        if ":" in code:
            a, _, b = code.partition(":")
            exit_code = int(a) if a.isdigit() else None
            signal = int(b) if b.isdigit() else None
        out.append(
            SacctRecord(
                job_id=job_id,
                step=step or None,
                state=state.split(" ", 1)[0].upper() or "UNKNOWN",
                exit_code=exit_code,
                signal=signal,
            )
        )
    return out


# ---------------------------------------------------------------------------- scontrol -o


_KEY_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_:/]*)=(.*)$", re.S)
#: Keys of node records whose value runs to the end of the line (free text with spaces/'=').
_TAIL_KEYS = frozenset({"Reason"})


def parse_scontrol_kv(text: str) -> list[dict[str, str]]:
    """``scontrol show job|node|partition -o``: one record per line of ``Key=Value`` pairs.

    A token without ``=`` continues the previous value (``OS=Linux 6.1 #1 SMP``); a node's
    ``Reason=`` (last on the line) takes the rest of the line.
    """
    records: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        rec: dict[str, str] = {}
        last: str | None = None
        tokens = line.strip().split(" ")
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            m = _KEY_RE.match(tok)
            if m:
                key, value = m.group(1), m.group(2)
                if key in _TAIL_KEYS and "NodeName" in rec:
                    rec[key] = " ".join([value, *tokens[i + 1 :]]).strip()
                    break
                rec[key] = value
                last = key
            elif last is not None:
                rec[last] = (rec[last] + " " + tok) if tok else rec[last]
            elif tok:
                raise SlurmOutputError(f"unexpected scontrol output: {line[:80]!r}")
            i += 1
        if not rec:
            raise SlurmOutputError(f"unexpected scontrol output: {line[:80]!r}")
        records.append(rec)
    return records


def parse_slurm_duration(text: str | None) -> int | None:
    """Slurm time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM[:SS]``) -> whole minutes
    (seconds rounded up). UNLIMITED/INFINITE/NONE/empty -> None."""
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A", "(NULL)"):
        return None
    days = 0
    rest = text
    if "-" in text:
        d, _, rest = text.partition("-")
        if not d.isdigit():
            return None
        days = int(d)
        parts = rest.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) > 3:
            return None
        h = int(parts[0])
        m = int(parts[1]) if len(parts) > 1 else 0
        s = int(parts[2]) if len(parts) > 2 else 0
    else:
        parts = rest.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) > 3:
            return None
        if len(parts) == 1:
            h, m, s = 0, int(parts[0]), 0
        elif len(parts) == 2:
            h, m, s = 0, int(parts[0]), int(parts[1])
        else:
            h, m, s = int(parts[0]), int(parts[1]), int(parts[2])
    return days * 1440 + h * 60 + m + (1 if s else 0)


def parse_partitions(text: str) -> list[PartitionInfo]:
    """``scontrol show partition -o`` -> partitions."""
    out: list[PartitionInfo] = []
    for rec in parse_scontrol_kv(text):
        name = rec.get("PartitionName")
        if not name:
            raise SlurmOutputError("partition record without PartitionName")
        max_gpus: int | None = None
        for key in ("MaxTRESPerNode", "MaxTRESPN"):
            if key in rec:
                max_gpus = _tres_value(rec[key], "gres/gpu")
        total = rec.get("TotalNodes")
        out.append(
            PartitionInfo(
                name=name,
                state=rec.get("State", "unknown").lower(),
                max_time_minutes=parse_slurm_duration(rec.get("MaxTime")),
                nodes=rec.get("Nodes", "") if rec.get("Nodes") != "(null)" else "",
                is_default=rec.get("Default", "NO").upper() == "YES",
                max_gpus_per_node=max_gpus,
                total_nodes=int(total) if total and total.isdigit() else None,
            )
        )
    return out


def _scontrol_time(text: str | None) -> datetime | None:
    if not text or text in ("None", "Unknown", "(null)", "N/A"):
        return None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    return dt.astimezone(UTC) if dt.tzinfo is None else dt


def parse_scontrol_nodes(text: str) -> list[NodeInfo]:
    """``scontrol show node -o`` -> nodes (text fallback when JSON is not available)."""
    out: list[NodeInfo] = []
    for rec in parse_scontrol_kv(text):
        name = rec.get("NodeName")
        if not name:
            raise SlurmOutputError("node record without NodeName")
        states = [s for s in rec.get("State", "UNKNOWN").split("+") if s]
        base_raw = states[0].rstrip("*~#!%$@^-").lower()
        flags = {s.upper() for s in states[1:]}
        if states[0].endswith("*"):
            flags.add("NOT_RESPONDING")
        base, more = _node_state([base_raw], list(flags))
        reason = rec.get("Reason")
        reason_by: str | None = None
        reason_at: datetime | None = None
        if reason:
            m = re.match(r"^(.*) \[([^\]@]+)@([^\]]+)\]$", reason)
            if m:
                reason, reason_by, reason_at = m.group(1), m.group(2), _scontrol_time(m.group(3))
        gt, gtype = parse_gres(rec.get("Gres"))
        gu, _ = parse_gres(rec.get("GresUsed"))
        out.append(
            NodeInfo(
                name=name,
                state=base,
                flags=more,
                reason=reason or None,
                reason_set_by=reason_by,
                reason_changed_at=reason_at,
                cpus=slurm_number(rec.get("CPUTot")),
                cpus_alloc=slurm_number(rec.get("CPUAlloc")),
                memory_mb=slurm_number(rec.get("RealMemory")),
                gpus_total=gt,
                gpus_used=gu,
                gpu_type=gtype,
                partitions=tuple(p for p in rec.get("Partitions", "").split(",") if p),
                boot_time=_scontrol_time(rec.get("BootTime")),
            )
        )
    return out


# ---------------------------------------------------------------------------- sbatch


def parse_sbatch_parsable(stdout: str) -> int:
    """``sbatch --parsable`` prints ``123`` or ``123;cluster`` -> 123."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise SlurmOutputError("sbatch printed no job id")
    first = lines[-1].split(";", 1)[0]
    if not first.isdigit():
        raise SlurmOutputError(f"sbatch printed no job id: {lines[-1][:80]!r}")
    return int(first)


def parse_sbatch_error(stderr: str) -> str:
    """Slurm's own reason from sbatch's stderr (``Batch job submission failed: <text>``)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r"Batch job submission failed:\s*(.*)$", ln)
        if m:
            return m.group(1).strip()
    # other errors span several "sbatch: error:" lines: join them into one message
    errors = [re.sub(r"^sbatch:\s*error:\s*", "", ln) for ln in lines if "error:" in ln]
    if errors:
        return " ".join(errors)
    return lines[-1] if lines else "sbatch failed without a message"


def hostlist_first(nodes: Sequence[str]) -> str | None:
    return nodes[0] if nodes else None


# ---------------------------------------------------------------------------- config and jobcomp


def parse_scontrol_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key  = Value`` lines -> {Key: Value} (other lines ignored)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key and " " not in key:
            out[key] = value.strip()
    return out


#: ``Key=`` at the start of a line or after whitespace (jobcomp/filetxt keeps spaces in values).
_JOBCOMP_KEY_RE = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z]*)=")


def _jobcomp_record(line: str) -> dict[str, str]:
    marks = list(_JOBCOMP_KEY_RE.finditer(line))
    ends = [m.start() for m in marks[1:]] + [len(line)] if marks else []
    return {m.group(1): line[m.end() : end].strip() for m, end in zip(marks, ends, strict=True)}


def _jobcomp_exit_code(text: str | None) -> int | None:
    """``ExitCode=N:S`` -> N, or 128+S when killed by signal S."""
    code, sep, sig = (text or "").partition(":")
    if not sep or not code.isdigit() or not sig.isdigit():
        return None
    return 128 + int(sig) if int(sig) else int(code)


def parse_jobcomp_filetxt(text: str, *, errors: list[str] | None = None) -> list[JobInfo]:
    """Lines of a ``JobCompType=jobcomp/filetxt`` file (one finished job per line) -> jobs.

    Unknown keys are ignored; a line without an integer ``JobId`` or a ``JobState`` is skipped
    and described in ``errors`` (when given). Times are the controller's local time.
    """
    out: list[JobInfo] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        rec = _jobcomp_record(line)
        job_id, state = rec.get("JobId", ""), rec.get("JobState", "").split(" ", 1)[0].upper()
        if not job_id.isdigit() or not state:
            if errors is not None:
                errors.append(f"line {number}: not a jobcomp record: {line[:80]!r}")
            continue
        node_count = _int_or_none(rec.get("NodeCnt"))
        gpus = _tres_value(rec.get("Tres"), "gres/gpu") or _tres_value(rec.get("ReqTRES"), "gres/gpu") or 0
        nodes = rec.get("NodeList", "")
        out.append(
            JobInfo(
                job_id=int(job_id),
                name=rec.get("Name", ""),
                user=rec.get("UserId", "").split("(", 1)[0] or None,
                state=state,
                account=rec.get("Account") or None,
                partition=rec.get("Partition") or None,
                nodes="" if nodes == "(null)" else nodes,
                node_count=node_count,
                gpus=gpus // node_count if node_count else gpus,
                cpus=_int_or_none(rec.get("ProcCnt")),
                submit_time=_scontrol_time(rec.get("SubmitTime")),
                start_time=_scontrol_time(rec.get("StartTime")),
                end_time=_scontrol_time(rec.get("EndTime")),
                time_limit_minutes=parse_slurm_duration(rec.get("TimeLimit")),
                exit_code=_jobcomp_exit_code(rec.get("ExitCode")),
                work_dir=rec.get("WorkDir") or None,
            )
        )
    return out


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
