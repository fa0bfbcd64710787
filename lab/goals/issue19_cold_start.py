"""Issue 19 goal for LeastCpu on a cold start, per seed, from an `rpclb lab --json` report.

Usage: python3 lab/goals/issue19_cold_start.py DIR, where DIR holds cold-start.json from
`rpclb lab --scenario cold-start --seeds 1..10 --algorithm least_cpu --algorithm random
--algorithm round_robin --json > DIR/cold-start.json` (other algorithms may be in it too).

Goal (issue 19): in cold-start (every member starts at once, 1 of 4 at 10x the service time;
LeastCpu's first readings come after its startup jitter), LeastCpu gives no member more than
1.5x its fair share in any 1 s window. A fair share is 1/members; the windows are the 1 s
buckets of the report's share_over_time (the scenario has no warm-up, so they start at the
cold start). It must hold for >= 9 of 10 seeds at each load. Printed per seed: the worst
bucket's ratio (a member's share in that bucket / its fair share), which member and which
bucket (seconds from the start), for least_cpu and, for comparison, random and round_robin.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
LIMIT = 1.5
GOAL = "least_cpu"
COMPARE = ["random", "round_robin"]

d = json.load(open(os.path.join(DIR, "cold-start.json")))
runs = collections.defaultdict(dict)  # (load, seed) -> algorithm -> run
loads = []
members = None
for sc in d["scenarios"]:
    members = sc["scenario"]["members"]
    for r in sc["runs"]:
        runs[(r["load"], r["seed"])][r["algorithm"]] = r
        if r["load"] not in loads:
            loads.append(r["load"])
fair = 1.0 / members


def worst(run):
    """(ratio, member, bucket start s) of the largest share / fair share over the buckets."""
    o = run.get("share_over_time")
    if o is None or run.get("overloaded_at_s") is not None:
        return None
    best = (0.0, None, None)
    for i, bucket in enumerate(o["shares"]):
        for m, share in enumerate(bucket):
            if share / fair > best[0]:
                best = (share / fair, m, i * o["bucket_s"])
    return best


def text(name, w):
    if w is None:
        return f"{name} n/a (no share_over_time, or overloaded)"
    ratio, member, at = w
    return f"{name} {ratio:.2f}x (member {member}, {at:.0f}-{at + 1:.0f} s)"


all_hold = True
for load in loads:
    seeds = sorted(s for (l, s) in runs if l == load)
    rows = []
    for seed in seeds:
        per = runs[(load, seed)]
        w = worst(per[GOAL])
        parts = [text(GOAL, w)] + [text(n, worst(per[n])) for n in COMPARE if n in per]
        rows.append((f"seed {seed}: worst 1 s share / fair share: " + "; ".join(parts),
                     w is not None and w[0] <= LIMIT))
    ok = sum(1 for _, good in rows if good)
    all_hold = all_hold and bool(rows) and ok * 10 >= 9 * len(rows)
    print(f"cold-start {load}, {GOAL} no member above {LIMIT} x fair share "
          f"({LIMIT * fair * 100:.1f} %) in any 1 s: holds for {ok}/{len(rows)} seeds")
    for detail, good in rows:
        print("   ", "ok " if good else "NO ", detail)
sys.exit(0 if all_hold else 1)
