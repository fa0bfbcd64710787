"""Issue 19 goals for PeakEwma, per seed, from `rpclb lab --json` reports.

Usage: python3 lab/goals/issue19_peak_ewma.py DIR, where DIR holds uniform.json, slow-member.json,
two-slow.json, paused-member.json and failing-member.json, each from
`rpclb lab --scenario S --seeds 1..10 --algorithm random --algorithm round_robin
--algorithm power_of_two --algorithm peak_ewma --json > DIR/S.json`.
"""
import os, sys
DIR = sys.argv[1] if len(sys.argv) > 1 else "."
import json, collections
def runs(name):
    d = json.load(open(os.path.join(DIR, f'{name}.json')))
    out = collections.defaultdict(dict)  # (load, seed) -> alg -> run
    for sc in d['scenarios']:
        for r in sc['runs']:
            out[(r['load'], r['seed'])][r['algorithm']] = r
    return out
def q(r, k): return r['latency_ms'][k]
def report(title, rows):
    ok = sum(1 for _, good in rows if good)
    print(f"{title}: holds for {ok}/{len(rows)} seeds")
    for detail, good in rows: print("   ", "ok " if good else "NO ", detail)
U = runs('uniform'); S = runs('slow-member'); T = runs('two-slow'); F = runs('failing-member')
P = runs('paused-member')
for load in ['open 50%', 'closed 16']:
    rows = []
    for seed in range(1, 11):
        s = S[(load, seed)]; pe, ra, p2 = s['peak_ewma'], s['random'], s['power_of_two']
        u = U[(load, seed)]['peak_ewma']
        cond = [q(pe,'p99') <= q(ra,'p99') / (10 if load.startswith('open') else 5)]
        if load.startswith('open'): cond.append(q(pe,'p999') <= q(p2,'p999') / 2)
        cond.append(abs(q(pe,'p50') / q(u,'p50') - 1) <= 0.10)
        rows.append((f"seed {seed}: PE p99 {q(pe,'p99'):.2f} random {q(ra,'p99'):.2f}; PE p99.9 {q(pe,'p999'):.2f} P2C {q(p2,'p999'):.2f}; PE p50 {q(pe,'p50'):.3f} uniform {q(u,'p50'):.3f}", all(cond)))
    report(f"slow-member {load}", rows)
rows = []
for seed in range(1, 11):
    t = T[('open 50%', seed)]; pe, p2 = t['peak_ewma'], t['power_of_two']
    rows.append((f"seed {seed}: PE p99 {q(pe,'p99'):.2f} P2C {q(p2,'p99'):.2f}", q(pe,'p99') <= q(p2,'p99') / 2))
report("two-slow open 50%", rows)
for load in ['open 50%', 'open 85%', 'closed 16']:
    rows = []
    for seed in range(1, 11):
        f = F[(load, seed)]; pe, ra = f['peak_ewma'], f['random']
        rows.append((f"seed {seed}: PE errors {pe['error_rate']*100:.2f}% random {ra['error_rate']*100:.2f}%", pe['error_rate'] <= ra['error_rate'] / 5))
    report(f"failing-member {load}", rows)
for load in ['open 50%', 'open 85%', 'closed 16']:
    rows = []
    for seed in range(1, 11):
        pe = P[(load, seed)]['peak_ewma']
        ratio, picks = pe.get('fault_goodput_ratio'), pe.get('faulty_picks_per_caller')
        good = ratio is not None and ratio >= 0.9 and picks is not None and picks <= 3
        rows.append((f"seed {seed}: PE goodput during the pause / before {ratio:.3f}, most calls one caller sent to the paused member {picks}", good))
    report(f"paused-member {load}", rows)
