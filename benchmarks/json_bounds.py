"""What bounding JSON bodies costs (portal.jsonsafe): json.loads alone against json_loads (escaped-NUL
scan + iterative depth check) and json_loads_records (the ingest endpoint's fast path for lists of
flat records, decoded and shape-checked by msgspec), on telemetry-shaped bodies of 1,000 and 10,000
samples and on a typical API write. No database.

Run: .venv/bin/python benchmarks/json_bounds.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import measure, plain_args, row  # noqa: E402
from portal.jsonsafe import json_loads, json_loads_records  # noqa: E402


def samples(n: int) -> str:
    return json.dumps(
        [
            {"node": f"gpu{i % 64:04d}", "card": f"GPU-{i % 8}", "metric": "temperature_c", "value": 40.0 + i % 50,
             "ts": 1_764_000_000 + i}
            for i in range(n)
        ]
    )  # fmt: skip


def main() -> None:
    plain_args(__doc__)
    bodies = {
        "ingest 1,000 samples": samples(1_000),
        "ingest 10,000 samples": samples(10_000),
        "action submit": json.dumps(
            {
                "kind": "submit",
                "cluster": 2,
                "params": {"name": "eval", "script": "#!/bin/bash\nsrun x\n", "gpus": 4},
            }
        ),
    }
    for label, body in bodies.items():
        plain = measure(lambda b=body: json.loads(b), runs=50)
        bounded = measure(lambda b=body: json_loads(b), runs=50)
        raw = body.encode()
        records = measure(lambda b=raw: json_loads_records(b), runs=50)
        # the minimum is the figure to compare on a shared machine (the median carries the neighbours)
        extra = f"min {bounded['min_ms']:.2f} ms vs {plain['min_ms']:.2f} ms: " + (
            f"+{(bounded['min_ms'] / plain['min_ms'] - 1) * 100:.0f}% over json.loads"
            if plain["min_ms"]
            else ""
        )
        row(f"{label}: json.loads", plain, f"min {plain['min_ms']:.2f} ms")
        row(f"{label}: json_loads (bounded)", bounded, extra)
        row(f"{label}: json_loads_records (bounded)", records, f"min {records['min_ms']:.2f} ms")


if __name__ == "__main__":
    main()
