"""Issue 19 goal for slow start, per seed, from an `rpclb lab --json` report.

Usage: python3 lab/goals/issue19_slow_start.py DIR, where DIR holds new-member.json from
`rpclb lab --scenario new-member --seeds 1..10 --algorithm round_robin
--algorithm round_robin+slow_start --algorithm peak_ewma --algorithm peak_ewma+slow_start
--json > DIR/new-member.json`.

Goal (issue 19): with slow start, no member above 2x its fair share in the first 10 s after
the join, and the new member's share ramps over the window (30 s). A fair share is 1/5 (the
five members after the join); shares are per 1 s bucket of the report's share_over_time, the
buckets counted from the measured window's start (the scenario's join time minus the
warm-up). Each must hold for >= 9 of 10 seeds.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
WINDOW_S = 30
FIRST_S = 10

d = json.load(open(os.path.join(DIR, "new-member.json")))
out = collections.defaultdict(dict)  # (load, seed) -> algorithm -> run
for sc in d["scenarios"]:
    scenario = sc["scenario"]
    warmup = scenario.get("warmup_s", 0.0)
    join = next(e for e in scenario["event"] if e["action"] == "join")
    for r in sc["runs"]:
        out[(r["load"], r["seed"])][r["algorithm"]] = r
new, join_s = join["member"], join["at_s"]
members = scenario["members"]
fair = 1.0 / members


def after_join(run, seconds):
    """The shares of the `seconds` 1 s buckets from the join (bucket-aligned join assumed)."""
    o = run["share_over_time"]
    assert abs(o["bucket_s"] - 1.0) < 1e-9, o["bucket_s"]
    first = int(round(join_s - warmup))
    return o["shares"][first:first + seconds]


def report(title, rows):
    ok = sum(1 for _, good in rows if good)
    print(f"{title}: holds for {ok}/{len(rows)} seeds")
    for detail, good in rows:
        print("   ", "ok " if good else "NO ", detail)


loads = sorted({load for load, _ in out}, key=lambda l: (not l.startswith("open"), l))
algorithms = sorted({a for runs in out.values() for a in runs})
for load in loads:
    seeds = sorted(seed for l, seed in out if l == load)
    for algorithm in algorithms:
        rows = []
        for seed in seeds:
            run = out[(load, seed)][algorithm]
            if run.get("share_over_time") is None:
                rows.append((f"seed {seed}: no share_over_time", False))
                continue
            first = after_join(run, FIRST_S)
            top = max(max(b) for b in first)
            who = max(range(members), key=lambda m: max(b[m] for b in first))
            ramp = [b[new] for b in after_join(run, WINDOW_S + 5)]
            rows.append((
                f"seed {seed}: largest share in the first {FIRST_S} s {top * 100:.1f}% "
                f"(member {who}; 2x fair = {2 * fair * 100:.0f}%); new member's share per s: "
                + " ".join(f"{s * 100:.0f}" for s in ramp),
                top <= 2 * fair,
            ))
        report(f"new-member {load}, {algorithm}", rows)
