"""How far apart were the last two verify runs on each GPU model? (issue 3's stability goal)

Prints, per record (artifact, variant, params), the median time of the last two runs and their
relative difference, and whether every kernel longer than 20 us stayed within 2%.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kwiki.results.store import RecordRow, read_store  # noqa: E402


def main() -> int:
    for store in sorted((ROOT / "results").glob("*.jsonl")):
        rows, _ = read_store(store)
        records = [r for r in rows if isinstance(r, RecordRow) and r.passed and "time_us" in r.figures]
        run_ids = sorted({r.run_id for r in records})
        if len(run_ids) < 2:
            print(f"{store.name}: fewer than two runs")
            continue
        a, b = run_ids[-2:]
        key = lambda r: (r.artifact, r.variant, json.dumps(r.params, sort_keys=True))  # noqa: E731
        first = {key(r): r for r in records if r.run_id == a}
        second = {key(r): r for r in records if r.run_id == b}
        worst, over = 0.0, []
        print(f"{store.name}: runs {a} and {b}")
        for k in sorted(first.keys() & second.keys()):
            t1, t2 = first[k].figures["time_us"], second[k].figures["time_us"]
            diff = (t2 - t1) / t1
            long = min(t1, t2) > 20
            if long:
                worst = max(worst, abs(diff))
                if abs(diff) > 0.02:
                    over.append(k)
            print(f"  {k[0]:24s} {k[1]:28s} {k[2][:40]:40s} {t1:10.2f} {t2:10.2f} us  {diff:+7.2%}"
                  + ("" if long else "  (< 20 us)"))
        print(f"  worst difference among kernels > 20 us: {worst:.2%}; over 2%: {len(over)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
