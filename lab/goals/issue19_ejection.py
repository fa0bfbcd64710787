"""Issue 19 goals for outlier ejection, per seed, from `rpclb lab --json` reports.

Usage: python3 lab/goals/issue19_ejection.py DIR, where DIR holds paused-member.json and
failing-member.json, each from
`rpclb lab --scenario S --seeds 1..10 --algorithm random --algorithm round_robin
--algorithm round_robin+ejection --algorithm peak_ewma --algorithm peak_ewma+ejection --json > DIR/S.json`.

Goals (issue 19): paused-member — goodput during the pause >= 90 % of before for RoundRobin
with ejection, and no call sent to the paused member after it is suspected (<= 100 ms after it
went silent: the last call to it <= 100 ms after the pause began); failing-member — errors seen
by callers <= 1/5 of Random's for RoundRobin with ejection. Each must hold for >= 9 of 10 seeds.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."


def runs(name):
    d = json.load(open(os.path.join(DIR, f"{name}.json")))
    out = collections.defaultdict(dict)  # (load, seed) -> algorithm -> run
    for sc in d["scenarios"]:
        for r in sc["runs"]:
            out[(r["load"], r["seed"])][r["algorithm"]] = r
    return out


def report(title, rows):
    ok = sum(1 for _, good in rows if good)
    print(f"{title}: holds for {ok}/{len(rows)} seeds")
    for detail, good in rows:
        print("   ", "ok " if good else "NO ", detail)


P = runs("paused-member")
F = runs("failing-member")
RRE = "round_robin+ejection"
for load in ["open 50%", "open 85%", "closed 16"]:
    rows = []
    for seed in range(1, 11):
        run, plain = P[(load, seed)][RRE], P[(load, seed)]["round_robin"]
        ratio, last = run.get("fault_goodput_ratio"), run.get("last_faulty_pick_ms")
        good = ratio is not None and ratio >= 0.9 and last is not None and last <= 100
        rows.append((
            f"seed {seed}: goodput during/before {ratio:.3f} (round_robin {plain['fault_goodput_ratio']:.3f}); "
            f"last call to the paused member {last:.1f} ms after it paused "
            f"(round_robin {plain['last_faulty_pick_ms']:.1f} ms)",
            good,
        ))
    report(f"paused-member {load}, round_robin+ejection", rows)
for load in ["open 50%", "open 85%", "closed 16"]:
    rows = []
    for seed in range(1, 11):
        runs_ = F[(load, seed)]
        run, random_ = runs_[RRE], runs_["random"]
        rows.append((
            f"seed {seed}: errors {run['error_rate'] * 100:.3f}% random {random_['error_rate'] * 100:.3f}% "
            f"(peak_ewma {runs_['peak_ewma']['error_rate'] * 100:.3f}%, "
            f"peak_ewma+ejection {runs_['peak_ewma+ejection']['error_rate'] * 100:.3f}%)",
            run["error_rate"] <= random_["error_rate"] / 5,
        ))
    report(f"failing-member {load}, round_robin+ejection", rows)
