#!/usr/bin/env python3
"""Issue 22's hedging goal on real processes: the stragglers twin beside the lab.

Usage: python3 bench/twin_hedging.py DIR, DIR holding
- without-N.json / with-N.json (N = 1, 2, ...): `rpclb demo --scenario stragglers
  --algorithms random,power_of_two,peak_ewma --duration-s 30 --warmup-s 2 --json`, without
  and with `--hedge p95,0.05,1`, run interleaved (without-1, with-1, without-2, ...);
- lab-without.json / lab-with.json (optional): `rpclb lab --scenario
  bench/twin_stragglers.toml --seeds 1..10 --algorithm ... --json`, without and with the same
  `--hedge` (the twin's plan as a lab scenario; only its open 50 % rows are read).

Prints per side and algorithm the medians over the runs (seeds) of p50/p99/p99.9 without ->
with, p99.9 with / without (of the medians), the extra calls (median, range), the share of
second copies that won, the budget's refusals and the errors (summed), and "holds": the runs
(pairs without-N, with-N; seeds in the lab) where p99.9 with <= 1/3 of without and the extra
calls <= 5 %. Then every twin run.
"""
import json, sys, statistics, glob, os
d = sys.argv[1]
def load(mode):
    out = {}
    for f in sorted(glob.glob(f"{d}/{mode}-[0-9].json")):
        if os.path.getsize(f) == 0: continue
        doc = json.load(open(f))
        for run in doc["runs"]:
            out.setdefault(run["algorithm"], []).append(run)
    return out
wo, wi = load("without"), load("with")
def lab(mode):
    f = f"{d}/lab-{mode}.json"
    if not os.path.exists(f): return {}
    doc = json.load(open(f))
    out = {}
    for sc in doc["scenarios"]:
        for run in sc["runs"]:
            if run["load"] == "open 50%":
                out.setdefault(run["algorithm"], []).append(run)
    return out
lwo, lwi = lab("without"), lab("with")
med = statistics.median
def lat(runs, k): return [r["latency_ms"][k] for r in runs]
def fmt(xs, p=2): return f"{med(xs):.{p}f} ({min(xs):.{p}f}–{max(xs):.{p}f})"
print("| side | algorithm | p50 ms without → with | p99 ms without → with | p99.9 ms without → with | p99.9 with ÷ without | extra calls | won | refused by the budget | errors without / with | holds |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for side, a, b in (("twin", wo, wi), ("lab", lwo, lwi)):
    for alg in wo:
        if alg not in a or alg not in b: continue
        A, B = a[alg], b[alg]
        ratio = med(lat(B, "p999")) / med(lat(A, "p999"))
        extra = [r["hedges"]["extra_share"] * 100 for r in B]
        won = sum(r["hedges"]["won"] for r in B) / max(1, sum(r["hedges"]["hedges"] for r in B))
        refused = sum(r["hedges"]["refused_by_budget"] for r in B)
        errs = (sum(r["errors"] for r in A), sum(r["errors"] for r in B))
        holds = sum(1 for x, y in zip(A, B) if y["latency_ms"]["p999"] <= x["latency_ms"]["p999"] / 3 and y["hedges"]["extra_share"] <= 0.05)
        print(f"| {side} | `{alg}` | {med(lat(A,'p50')):.2f} → {med(lat(B,'p50')):.2f} | {med(lat(A,'p99')):.2f} → {med(lat(B,'p99')):.2f} | {med(lat(A,'p999')):.2f} → {med(lat(B,'p999')):.2f} | {ratio:.3f} | {fmt(extra)} % | {won*100:.0f} % | {refused} | {errs[0]} / {errs[1]} | {holds}/{len(B)} |")
print()
print("per run (twin): algorithm, mode, run, calls, p50, p99, p99.9, errors, hedges sent/won/refused, extra %")
for mode, runs in (("without", wo), ("with", wi)):
    for alg, rs in runs.items():
        for i, r in enumerate(rs, 1):
            h = r.get("hedges")
            hs = f"{h['hedges']}/{h['won']}/{h['refused_by_budget']} {h['extra_share']*100:.2f} %" if h else "-"
            l = r["latency_ms"]
            print(f"  {alg:13} {mode:7} {i} calls {r['calls']} p50 {l['p50']:.2f} p99 {l['p99']:.2f} p99.9 {l['p999']:.2f} max {l['max']:.1f} errors {r['errors']} hedges {hs}")
