"""Issue 22 goal for hedged calls, per seed, from two `rpclb lab --json` reports.

Usage: python3 lab/goals/issue22_hedging.py DIR [-v], where DIR holds without.json and
with.json, from
`rpclb lab --scenario stragglers --seeds 1..10 --algorithm random --algorithm round_robin
--algorithm least_connections --algorithm power_of_two --algorithm peak_ewma --jobs 1
--json > DIR/without.json`
and the same with `--hedge p95,0.05,1` > DIR/with.json (calls idempotent, each caller
hedging as the library's HedgePolicy::at_percentile(95.0, 0.05, 1) does, through
testkit::HedgeKit).

Goal (issue 22): in stragglers, p99.9 with hedging <= 1/3 of the same algorithm's without,
for <= 5 % extra calls (second copies / calls of the window). Must hold for >= 9 of 10
seeds, per algorithm and load.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
EXTRA = 0.05


def runs(name):
    d = json.load(open(os.path.join(DIR, f"{name}.json")))
    out = collections.defaultdict(dict)  # (algorithm, load) -> seed -> run
    for sc in d["scenarios"]:
        for r in sc["runs"]:
            out[(r["algorithm"], r["load"])][r["seed"]] = r
    return out


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


WITHOUT, WITH = runs("without"), runs("with")
for key in sorted(WITHOUT):
    rows = []
    for seed in sorted(WITHOUT[key]):
        a, b = WITHOUT[key][seed], WITH[key][seed]
        h = b["hedges"]
        pa, pb = a["latency_ms"]["p999"], b["latency_ms"]["p999"]
        good = pb * 3 <= pa and h["extra_share"] <= EXTRA
        rows.append((
            f"seed {seed}: p99.9 {pa:.2f} -> {pb:.2f} ms ({pb / pa:.3f}), "
            f"p99 {a['latency_ms']['p99']:.2f} -> {b['latency_ms']['p99']:.2f} ms, "
            f"p50 {a['latency_ms']['p50']:.3f} -> {b['latency_ms']['p50']:.3f} ms, "
            f"extra calls {h['extra_share'] * 100:.2f}%, won {h['won']}, "
            f"refused by the budget {h['refused_by_budget']}",
            good,
        ))
    ok = sum(1 for _, good in rows if good)
    seeds = sorted(WITHOUT[key])
    pa = median([WITHOUT[key][s]["latency_ms"]["p999"] for s in seeds])
    pb = median([WITH[key][s]["latency_ms"]["p999"] for s in seeds])
    extra = [WITH[key][s]["hedges"]["extra_share"] for s in seeds]
    print(f"{key[0]} {key[1]}: holds for {ok}/{len(rows)} seeds "
          f"(median p99.9 {pa:.2f} -> {pb:.2f} ms, extra calls "
          f"{median(extra) * 100:.2f}% ({min(extra) * 100:.2f}-{max(extra) * 100:.2f}%))")
    if "-v" in sys.argv:
        for detail, good in rows:
            print("   ", "ok " if good else "NO ", detail)
