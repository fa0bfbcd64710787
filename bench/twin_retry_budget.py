"""Issue 22 goal for retry budgets on real processes, from `rpclb demo --json` reports.

Usage: python3 bench/twin_retry_budget.py DIR, where DIR holds, for each load L (0.5, 0.85)
and repetition R (1, 2, 3), without-L-R.json from
`rpclb demo --scenario failing-member --fail-kind retryable
--algorithms random,round_robin,power_of_two,peak_ewma --load L --duration-s 20 --json`
and with-L-R.json, the same with `--retries` (run interleaved: without, with, per L and R).

Goal (issue 22): caller-visible errors with retries <= 1/10 of those without (the same L and
R), and the extra calls (retries / calls) within the budget: 20 % of calls plus 10 per second
per caller over the window. "holds" counts the pairs where both do. Prints a Markdown table:
medians over the repetitions (errors, p99; extra calls: median and range), the budget's
refusals summed.
"""
import json
import os
import statistics
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
RATIO, MIN_PER_SECOND = 0.2, 10
LOADS = ("0.5", "0.85")
ALGORITHMS = ("random", "round_robin", "power_of_two", "peak_ewma")


def report(mode, load, rep):
    path = os.path.join(DIR, f"{mode}-{load}-{rep}.json")
    try:
        d = json.load(open(path))
    except (OSError, ValueError):  # not there, or still being written
        return None
    window_s = d["scenario"]["measure_s"]
    callers = d["scenario"]["callers"]
    return {r["algorithm"]: (r, window_s, callers) for r in d["runs"]}


def main():
    print("| algorithm | load | errors without | errors with | extra calls | refused by the budget "
          "| p99 ms without → with | holds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for algorithm in ALGORITHMS:
        for load in LOADS:
            without, with_, extra, refused, p99a, p99b, holds, pairs = [], [], [], 0, [], [], 0, 0
            for rep in range(1, 10):
                a, b = report("without", load, rep), report("with", load, rep)
                if not a or not b or algorithm not in a or algorithm not in b:
                    continue
                (ra, _, _), (rb, window_s, callers) = a[algorithm], b[algorithm]
                share = rb["retries"]["extra_share"]
                budget = RATIO + MIN_PER_SECOND * callers * window_s / max(rb["calls"], 1)
                without.append(ra["error_rate"])
                with_.append(rb["error_rate"])
                extra.append(share)
                refused += rb["retries"]["refused_by_budget"]
                p99a.append(ra["latency_ms"]["p99"])
                p99b.append(rb["latency_ms"]["p99"])
                pairs += 1
                holds += rb["errors"] * 10 <= ra["errors"] and share <= budget
            if not pairs:
                continue
            med = statistics.median
            print(f"| `{algorithm}` | open {round(float(load) * 100)}% | {med(without) * 100:.3f} % "
                  f"| {med(with_) * 100:.3f} % | {med(extra) * 100:.2f} % "
                  f"({min(extra) * 100:.2f}–{max(extra) * 100:.2f}) | {refused:,} "
                  f"| {med(p99a):.1f} → {med(p99b):.1f} | {holds}/{pairs} |")


main()
