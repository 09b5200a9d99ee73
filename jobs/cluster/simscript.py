"""What the simulator makes of a batch script: its plan and the lines it prints.

``sleep N`` lines add to the run time, ``exit N`` sets the exit status, a ``# sim: duration=N exit=N``
comment overrides both. ``echo`` lines are printed and ``VAR=value`` / ``export VAR=value`` lines
assigned, in script order, when the job starts, with the shell's expansion of the job's environment
(the ``SLURM_*`` variables Slurm sets, the submitted ``--export`` values, the script's own
assignments): ``$VAR``, ``${VAR}``, ``${VAR:-default}``, quotes as bash reads them, and a few
command substitutions a batch script uses (``$(hostname)``, ``$(scontrol show hostnames ... | head
-n 1)``, ``$(date)``, ``$(whoami)``, ``$(nproc)``, ``$(pwd)``); any other command prints nothing.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

_SLEEP_RE = re.compile(r"^\s*sleep\s+(\d+(?:\.\d+)?)\s*$")
_EXIT_RE = re.compile(r"^\s*exit\s+(\d+)\s*$")
_ECHO_RE = re.compile(r"^\s*echo\s+(.*)$")
_ASSIGN_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_SIM_RE = re.compile(r"^\s*#\s*sim:\s*(.*)$")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ScriptPlan:
    duration: float
    exit_code: int
    #: ("echo", raw arguments) or ("set", raw "NAME=value"), in script order
    steps: tuple[tuple[str, str], ...]

    @property
    def prints(self) -> bool:
        return any(kind == "echo" for kind, _raw in self.steps)


def script_plan(script: str, rng: random.Random) -> ScriptPlan:
    """The run time, exit status and output steps of a batch script (a script with no sleep, echo
    or ``# sim:`` directive runs for a seeded random 60-600 s)."""
    duration = 0.0
    exit_code = 0
    steps: list[tuple[str, str]] = []
    directive: dict[str, str] = {}
    for line in script.splitlines():
        if m := _SLEEP_RE.match(line):
            duration += float(m.group(1))
        elif m := _EXIT_RE.match(line):
            exit_code = int(m.group(1)) & 0xFF
        elif m := _ECHO_RE.match(line):
            steps.append(("echo", m.group(1)))
        elif m := _ASSIGN_RE.match(line):
            steps.append(("set", f"{m.group(1)}={m.group(2)}"))
        elif m := _SIM_RE.match(line):
            for kv in m.group(1).split():
                k, _, v = kv.partition("=")
                directive[k] = v
    if "duration" in directive:
        with contextlib.suppress(ValueError):
            duration = float(directive["duration"])
    if "exit" in directive and directive["exit"].isdigit():
        exit_code = int(directive["exit"]) & 0xFF
    plan = ScriptPlan(duration, exit_code, tuple(steps))
    if duration <= 0 and not plan.prints and "duration" not in directive:
        duration = float(rng.randint(60, 600))
    return ScriptPlan(max(duration, 1.0), exit_code, plan.steps)


# ---------------------------------------------------------------------------- hostlists


def hostlist_compress(names: Sequence[str]) -> str:
    """``[gpu01, gpu02, gpu04, rig01]`` -> ``gpu[01-02,04],rig01`` (Slurm's ``SLURM_JOB_NODELIST``)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if m is None:
            order.append(name)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    out: list[str] = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges: list[str] = []
        lo = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{lo:0{width}d}" if lo == prev else f"{lo:0{width}d}-{prev:0{width}d}")
            if n is not None:
                lo = prev = n
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)


def hostlist_expand(text: str) -> list[str]:
    """``gpu[01-02,04],rig01`` -> ``[gpu01, gpu02, gpu04, rig01]``."""
    out: list[str] = []
    for item in re.findall(r"[^,\[]*(?:\[[^\]]*\][^,\[]*)*", text):
        if not item:
            continue
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", item)
        if m is None:
            out.append(item)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if hi and lo.isdigit() and hi.isdigit():
                out += [f"{prefix}{i:0{len(lo)}d}{suffix}" for i in range(int(lo), int(hi) + 1)]
            else:
                out.append(f"{prefix}{r}{suffix}")
    return out


# ---------------------------------------------------------------------------- the shell's expansion


@dataclass
class ShellContext:
    """What a job's shell sees: its environment and the answers of the commands it may run."""

    env: dict[str, str]
    hostname: str
    now: datetime
    cpus: int = 1

    def run(self, command: str) -> str:
        """The output of ``$(command)``: a pipeline of the commands a batch script uses."""
        lines: list[str] | None = None
        for stage in _split_unquoted(command, "|"):
            words = self.words(stage)
            if not words:
                return ""
            lines = self._stage(words, lines)
        return "\n".join(lines or [])

    def _stage(self, words: list[str], stdin: list[str] | None) -> list[str]:
        cmd, args = words[0], words[1:]
        if stdin is not None:
            count = _count_arg(args)
            if cmd == "head":
                return stdin[:count]
            if cmd == "tail":
                return stdin[-count:] if count else []
            if cmd == "wc" and args == ["-l"]:
                return [str(len(stdin))]
            return []
        if cmd == "hostname":
            return [self.hostname]
        if cmd == "scontrol" and args[:2] in (["show", "hostnames"], ["show", "hostname"]):
            target = args[2] if len(args) > 2 else self.env.get("SLURM_JOB_NODELIST", "")
            return hostlist_expand(target)
        if cmd == "date":
            return [f"{self.now:%a %b} {self.now.day:2d} {self.now:%H:%M:%S %Z %Y}"]
        if cmd == "whoami":
            return [self.env.get("USER", "")]
        if cmd == "nproc":
            return [str(self.cpus)]
        if cmd == "pwd":
            return [self.env.get("PWD", "")]
        if cmd == "echo":
            return [" ".join(args)]
        return []

    def assign(self, raw: str) -> None:
        name, _, value = raw.partition("=")
        words = self.words(value, split=False)
        self.env[name] = words[0] if words else ""

    def echo(self, raw: str) -> str:
        words = self.words(raw)
        while words and words[0] in ("-n", "-e", "-E", "-ne", "-en"):
            words = words[1:]
        return " ".join(words)

    def words(self, raw: str, *, split: bool = True) -> list[str]:
        """The words of a command line after quote removal and expansion (up to a ``#`` comment)."""
        words: list[str] = []
        cur: list[str] = []
        quoted = in_word = False
        i, n = 0, len(raw)

        def end_word() -> None:
            nonlocal cur, quoted, in_word
            if in_word and (cur and "".join(cur) or quoted):
                words.append("".join(cur))
            cur, quoted, in_word = [], False, False

        while i < n:
            c = raw[i]
            if c in " \t" and split:
                end_word()
                i += 1
            elif c == "#" and not in_word:
                break
            elif c == "'":
                j = raw.find("'", i + 1)
                j = n if j < 0 else j
                cur.append(raw[i + 1 : j])
                quoted = in_word = True
                i = j + 1
            elif c == '"':
                text, i = self._double_quoted(raw, i + 1)
                cur.append(text)
                quoted = in_word = True
            elif c == "\\" and i + 1 < n:
                cur.append(raw[i + 1])
                in_word = True
                i += 2
            elif c == "$":
                text, i = self._dollar(raw, i)
                in_word = True
                if not split:
                    cur.append(text)
                    continue
                parts = text.split()
                if not parts:
                    continue
                if text[:1].isspace():
                    end_word()
                    in_word = True
                for k, part in enumerate(parts):
                    if k:
                        end_word()
                        in_word = True
                    cur.append(part)
                if text[-1:].isspace():
                    end_word()
            else:
                cur.append(c)
                in_word = True
                i += 1
        end_word()
        return words

    def _double_quoted(self, raw: str, i: int) -> tuple[str, int]:
        buf: list[str] = []
        n = len(raw)
        while i < n and raw[i] != '"':
            if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$`"\\':
                buf.append(raw[i + 1])
                i += 2
            elif raw[i] == "$":
                text, i = self._dollar(raw, i)
                buf.append(text)
            else:
                buf.append(raw[i])
                i += 1
        return "".join(buf), i + 1

    def _dollar(self, raw: str, i: int) -> tuple[str, int]:
        """Expand the ``$...`` at ``raw[i]``; returns (text, index after it)."""
        nxt = raw[i + 1 : i + 2]
        if nxt == "(":
            j = _matching(raw, i + 1, "(", ")")
            return self.run(raw[i + 2 : j]).rstrip("\n"), j + 1
        if nxt == "{":
            j = _matching(raw, i + 1, "{", "}")
            inner = raw[i + 2 : j]
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(:?[-=+])?(.*)", inner, re.S)
            if m is None:
                return "", j + 1
            name, op, word = m.group(1), m.group(2), m.group(3)
            value = self.env.get(name)
            if op is None:
                return value or "", j + 1
            unset = value is None or (op.startswith(":") and value == "")
            default = " ".join(self.words(word, split=False))
            if op.endswith("+"):
                return ("" if unset else default), j + 1
            if unset and op.endswith("="):
                self.env[name] = default
            return (default if unset else value or ""), j + 1
        m = _NAME_RE.match(raw, i + 1)
        if m is not None:
            return self.env.get(m.group(0), ""), m.end()
        if nxt.isdigit() or nxt in ("#", "?", "@", "*"):
            return {"#": "0", "?": "0"}.get(nxt, ""), i + 2
        return "$", i + 1


def _matching(raw: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``raw[i]`` (quotes skipped); len(raw) if none."""
    depth, quote = 0, ""
    for j in range(i, len(raw)):
        c = raw[j]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
    return len(raw)


def _split_unquoted(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    quote, depth = "", 0
    for c in text:
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(c)
    parts.append("".join(cur))
    return parts


def _count_arg(args: list[str]) -> int:
    if len(args) >= 2 and args[0] == "-n" and args[1].isdigit():
        return int(args[1])
    if args and args[0].startswith("-") and args[0][1:].isdigit():
        return int(args[0][1:])
    return 10


def job_environment(
    *,
    job_id: int,
    name: str,
    user: str,
    nodes: Sequence[str],
    partition: str,
    account: str | None,
    gpus: int,
    ntasks_per_node: int,
    cpus_per_task: int | None,
    work_dir: str,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The environment Slurm gives a batch script (on the job's first node)."""
    nodelist = hostlist_compress(nodes)
    env = {
        "HOME": f"/home/{user}",
        "USER": user,
        "LOGNAME": user,
        "PWD": work_dir,
        "HOSTNAME": nodes[0] if nodes else "",
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOBID": str(job_id),
        "SLURM_JOB_NAME": name,
        "SLURM_JOB_USER": user,
        "SLURM_JOB_PARTITION": partition,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(nodes)),
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NTASKS": str(len(nodes) * ntasks_per_node),
        "SLURM_NTASKS_PER_NODE": str(ntasks_per_node),
        "SLURM_SUBMIT_DIR": work_dir,
        "SLURM_SUBMIT_HOST": "login",
        "SLURMD_NODENAME": nodes[0] if nodes else "",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
    }
    if account:
        env["SLURM_JOB_ACCOUNT"] = account
    if cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(cpus_per_task)
    if gpus:
        env["SLURM_GPUS_ON_NODE"] = str(gpus)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    env.update(extra)
    return env


def script_output(
    steps: Sequence[tuple[str, str]], env: Mapping[str, str], *, hostname: str, now: datetime, cpus: int
) -> list[str]:
    """The lines the script's echo steps print, in order, with its assignments applied."""
    shell = ShellContext(env=dict(env), hostname=hostname, now=now, cpus=cpus)
    out: list[str] = []
    for kind, raw in steps:
        if kind == "set":
            shell.assign(raw)
        else:
            out.append(shell.echo(raw))
    return out


__all__ = [
    "ScriptPlan",
    "ShellContext",
    "hostlist_compress",
    "hostlist_expand",
    "job_environment",
    "script_output",
    "script_plan",
]
