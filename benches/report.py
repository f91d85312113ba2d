"""Summarise a pytest-benchmark JSON file as the table quoted in closing notes: per group, the median of each
backend, throughput (messages or units per second where the benchmark records them) and the Rust/Python ratio.

    .venv/bin/python -m pytest benches --benchmark-enable --benchmark-json=/tmp/bench.json
    .venv/bin/python benches/report.py /tmp/bench.json
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    groups: dict[str, dict[str, dict]] = defaultdict(dict)
    for b in data["benchmarks"]:
        m = re.search(r"\[(?:.*-)?(rust|python)\]$", b["name"]) or re.search(r"\[(rust|python)(?:-.*)?\]$", b["name"])
        backend = m.group(1) if m else "?"
        groups[b["group"] or b["name"]][backend] = b
    print(f"{'benchmark':34} {'rust median':>13} {'python median':>14} {'ratio':>7}  throughput (rust / python)")
    for group, by in sorted(groups.items()):
        r, p = by.get("rust"), by.get("python")

        def med(b):
            return b["stats"]["median"] if b else float("nan")

        def rate(b):
            if not b:
                return ""
            per = b.get("extra_info", {}).get("messages_per_round") or b.get("extra_info", {}).get("units_per_round")
            return f"{per / b['stats']['median']:,.0f}/s" if per else f"{1 / b['stats']['median']:,.0f} ops/s"

        ratio = med(p) / med(r) if r and p else float("nan")
        print(f"{group:34} {med(r) * 1e6:11.1f}us {med(p) * 1e6:12.1f}us {ratio:6.1f}x  {rate(r)} / {rate(p)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/bench.json")
