"""Issue 21 goal for deterministic subsetting, per seed, from `rpclb lab --json` reports.

Usage: python3 lab/goals/issue21_subsetting.py DIR, where DIR holds, for each scheme S of
aperture, rendezvous and rounds (those present are read; aperture, the library's default, is
required),

    rpclb lab --scenario large --subset 20 --subset-scheme S --algorithm round_robin \\
      --algorithm power_of_two --seeds 1..10 --jobs 2 --json > DIR/large-S.json

and optionally `rpclb lab --scenario large --subset 20 --subset-churn --json > DIR/churn.json`.

Goal (issue 21 item 2): in `large` (1,000 members, 200 callers, K = 20) every member's share
of the calls is within +-10 % of even (smallest and largest share / mean share in
[0.9, 1.1]) with the chosen scheme (aperture), for >= 9 of 10 seeds at each load and
algorithm. Also printed: the same figures for the other schemes, and, from churn.json, how
many subset entries change when one member leaves or joins.
"""
import collections
import json
import os
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
CHOSEN = "aperture"
SCHEMES = ["aperture", "rendezvous", "rounds"]
TOLERANCE = 0.10


def spread(run):
    """(least, most) share / mean share."""
    shares = run["shares"]
    mean = sum(shares) / len(shares)
    return min(shares) / mean, max(shares) / mean


def median(values):
    values = sorted(values)
    n = len(values)
    return (values[(n - 1) // 2] + values[n // 2]) / 2 if n else float("nan")


def holds(run):
    lo, hi = spread(run)
    return run.get("overloaded_at_s") is None and lo >= 1 - TOLERANCE and hi <= 1 + TOLERANCE


all_hold = True
for scheme in SCHEMES:
    path = os.path.join(DIR, f"large-{scheme}.json")
    if not os.path.exists(path):
        if scheme == CHOSEN:
            sys.exit(f"missing {path}")
        continue
    d = json.load(open(path))
    groups = collections.OrderedDict()  # (load, algorithm) -> runs
    for sc in d["scenarios"]:
        assert sc["scenario"].get("subset_scheme", "aperture") == scheme, path
        for r in sc["runs"]:
            groups.setdefault((r["load"], r["algorithm"]), []).append(r)
    for (load, algorithm), runs in groups.items():
        ok = sum(1 for r in runs if holds(r))
        spreads = [spread(r) for r in runs]
        lo = min(s[0] for s in spreads)
        hi = max(s[1] for s in spreads)
        passed = ok * 10 >= 9 * len(runs)
        if scheme == CHOSEN:
            all_hold = all_hold and passed
        label = "GOAL" if scheme == CHOSEN else "    "
        p99 = median([(r.get("latency_ms") or {}).get("p99", float("nan")) for r in runs])
        errors = median([r["error_rate"] for r in runs])
        overloaded = sum(1 for r in runs if r.get("overloaded_at_s") is not None)
        print(f"{label} {scheme:<10} {load:<12} {algorithm:<13} within +-10 % of even: "
              f"{ok}/{len(runs)} seeds; share / mean over the seeds {lo:.3f}-{hi:.3f}; "
              f"median p99 {p99:.2f} ms, errors {errors * 100:.2f} %"
              + (f"; {overloaded} overloaded" if overloaded else ""))

churn = os.path.join(DIR, "churn.json")
if os.path.exists(churn):
    for entry in json.load(open(churn))["subsets"]:
        f = entry["figures"]
        print(f"churn {entry['scenario']} {f['scheme']:<10} subsets per member "
              f"{f['coverage_min']}-{f['coverage_max']} (mean {f['coverage_mean']:.2f}); "
              f"entries changed of {f['callers'] * f['size']}: one leaves {f['leave_mean']:.1f} "
              f"(max {f['leave_max']}, per caller <= {f['leave_most_per_caller']}), one joins "
              f"{f['join_mean']:.1f} (max {f['join_max']}, per caller <= "
              f"{f['join_most_per_caller']}); {f['tried']} members tried")
sys.exit(0 if all_hold else 1)
