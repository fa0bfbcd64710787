"""Issue 22 goal for retry budgets, per seed, from two `rpclb lab --json` reports.

Usage: python3 lab/goals/issue22_retry_budget.py DIR, where DIR holds without.json and
with.json, from
`rpclb lab --scenario failing-member --seeds 1..10 --algorithm random --algorithm round_robin
--algorithm least_connections --algorithm power_of_two --algorithm peak_ewma
--algorithm round_robin+ejection --algorithm peak_ewma+ejection --jobs 2 --json > DIR/without.json`
and the same with `--retries` > DIR/with.json (calls idempotent, the library's default
RetryBudget per caller, `fail` failures of the retryable kind).

Goal (issue 22): in failing-member, caller-visible errors with retries <= 1/10 of those
without, and the extra calls (retries / calls) within the budget (20 % of calls; the
10-per-second reserve is 100 retries per 10 s window per caller, under 0.01 % of these
runs' calls). Must hold for >= 9 of 10 seeds, per algorithm and load.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
RATIO = 0.2


def runs(name):
    d = json.load(open(os.path.join(DIR, f"{name}.json")))
    out = collections.defaultdict(dict)  # (algorithm, load) -> seed -> run
    for sc in d["scenarios"]:
        for r in sc["runs"]:
            out[(r["algorithm"], r["load"])][r["seed"]] = r
    return out


WITHOUT, WITH = runs("without"), runs("with")
for key in sorted(WITHOUT):
    rows = []
    for seed in sorted(WITHOUT[key]):
        a, b = WITHOUT[key][seed], WITH[key][seed]
        retries = b["retries"]
        good = b["errors"] * 10 <= a["errors"] and retries["extra_share"] <= RATIO
        rows.append((
            f"seed {seed}: errors {a['errors']} -> {b['errors']} (timeouts {b['timeouts']}), "
            f"extra calls {retries['extra_share'] * 100:.2f}%, refused by the budget "
            f"{retries['refused_by_budget']}, p99 {a['latency_ms']['p99']:.2f} -> "
            f"{b['latency_ms']['p99']:.2f} ms",
            good,
        ))
    ok = sum(1 for _, good in rows if good)
    errors = [WITHOUT[key][s]["errors"] for s in WITHOUT[key]], [WITH[key][s]["errors"] for s in WITH[key]]
    extra = [WITH[key][s]["retries"]["extra_share"] for s in WITH[key]]
    print(f"{key[0]} {key[1]}: holds for {ok}/{len(rows)} seeds "
          f"(errors {sum(errors[0])} -> {sum(errors[1])} over the seeds, "
          f"extra calls {min(extra) * 100:.2f}-{max(extra) * 100:.2f}%)")
    if "-v" in sys.argv:
        for detail, good in rows:
            print("   ", "ok " if good else "NO ", detail)
