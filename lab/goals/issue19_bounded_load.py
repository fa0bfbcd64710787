"""Issue 19 goal for bounded-load consistent hashing, per seed, from an `rpclb lab --json` report.

Usage: python3 lab/goals/issue19_bounded_load.py DIR, where DIR holds hot-keys.json from
`rpclb lab --scenario hot-keys --seeds 1..10 --algorithm hash_ring --algorithm hash_ring_bounded
--algorithm round_robin --json > DIR/hot-keys.json`.

Goal (issue 19 item 7): in hot-keys (Zipf s = 1.0 over 100,000 keys), with balance_factor 1.25
(`hash_ring_bounded`) the busiest member's calls in flight, measured on the members (queued or
served, time-averaged over the window: `member_in_flight`), are <= 1.25 x the members' average
+ 1; it must hold for >= 9 of 10 seeds at each load. Also printed: the share of keyed calls that
left their home member (`calls_moved_from_home`: not sent to the key's owner on a plain ring),
and the same figures for plain hash_ring and round_robin.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
FACTOR = 1.25
ALGORITHMS = ["hash_ring", "hash_ring_bounded", "round_robin"]

d = json.load(open(os.path.join(DIR, "hot-keys.json")))
runs = collections.defaultdict(dict)  # (load, seed) -> algorithm -> run
loads = []
for sc in d["scenarios"]:
    for r in sc["runs"]:
        runs[(r["load"], r["seed"])][r["algorithm"]] = r
        if r["load"] not in loads:
            loads.append(r["load"])


def figures(run):
    """(busiest, average) member in flight, share moved from home, p99 ms."""
    m = run.get("member_in_flight") or []
    busiest = max(m) if m else float("nan")
    average = sum(m) / len(m) if m else float("nan")
    p99 = (run.get("latency_ms") or {}).get("p99", float("nan"))
    return busiest, average, run.get("calls_moved_from_home"), p99


def holds(run):
    busiest, average, _, _ = figures(run)
    return run.get("overloaded_at_s") is None and busiest <= FACTOR * average + 1


all_hold = True
for load in loads:
    seeds = sorted(s for (l, s) in runs if l == load)
    rows = []
    for seed in seeds:
        per = runs[(load, seed)]
        parts = []
        for name in ALGORITHMS:
            if name not in per:
                continue
            busiest, average, moved, p99 = figures(per[name])
            moved_text = "n/a" if moved is None else f"{moved * 100:.1f}%"
            parts.append(
                f"{name} busiest {busiest:.2f} avg {average:.2f} ({busiest / average:.2f}x) "
                f"moved {moved_text} p99 {p99:.2f} ms"
            )
        rows.append((f"seed {seed}: " + "; ".join(parts), holds(per["hash_ring_bounded"])))
    ok = sum(1 for _, good in rows if good)
    passed = ok * 10 >= 9 * len(rows) and rows
    all_hold = all_hold and bool(passed)
    print(f"hot-keys {load}, hash_ring_bounded busiest <= {FACTOR} x average + 1: "
          f"holds for {ok}/{len(rows)} seeds")
    for detail, good in rows:
        print("   ", "ok " if good else "NO ", detail)
sys.exit(0 if all_hold else 1)
