#!/usr/bin/env python3
"""Sessions and idle CPU of real `rpclb node` processes in the sparse mesh with deterministic
subsetting (issue 21 item 2).

Starts N `rpclb node --sparse-mesh` processes on 127.0.0.1 (free ports picked here): every
fourth node (index 0, 4, 8, ...) is a caller, named `caller_NNN`, the rest members, named
`member_NNN`; all run the balancer `b` with `--node-match member` (so only members are its
members) and round robin, and the callers add `--subset-size K` (aperture). Seeds form a
binary tree: node i > 0 is given `--peer` of node (i-1)//2, so no node has more than three
seed sessions. Each node's peer table is read from its stdout events (`ready`, `node_up`,
`node_down`).

The expected session graph is computed here: a node's tree neighbours, plus for a caller its
subset (aperture over the members sorted by full name, the callers sorted by full name, caller
c of n starting at member c*m//n, K in a row around the ring), plus for a member the callers
whose subset holds it. Reports:

* `settle_secs`: from spawning until every node's peer table is exactly the expected one;
  `None` if not within `--timeout`;
* `sessions_max_median`: the peer-table sizes (max, median) at the end of the idle period;
  `expected_max_median` the same for the expected graph; `matches_expected` whether the
  tables still equal it then;
* `flaps`: `node_down` lines after settling (a session lost while idle);
* `subsets_per_member_min_max`: in how many callers' subsets the members are (min, max; the
  expected graph's, which `matches_expected` confirms the nodes dialled);
* `idle_cpu_cores`: CPU time of all nodes together over `--idle-secs` after settling (from
  /proc/<pid>/stat), in cores; `idle_cpu_pct_per_node` the same per node, in % of a core.

Only processes started here are signalled; every node runs with `--exit-with-stdin`.

Usage (a release build: `cargo build --release -p rpclb`):

    python3 bench/subset_mesh.py --nodes 64 --subset 8 [--json] [--rpclb target/release/rpclb]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mesh_form import cpu_ticks, free_ports  # noqa: E402


def aperture(m, k, caller, callers):
    """Member indices of caller `caller` of `callers` over `m` members (routing::subset)."""
    k = min(k, m)
    start = caller * m // callers
    return sorted((start + j) % m for j in range(k))


def expected_graph(names, is_caller, k):
    """Full name -> set of full names each node should hold a session to."""
    full = [f"{n}@127.0.0.1" for n in names]
    peers = {f: set() for f in full}
    for i in range(1, len(names)):
        parent = (i - 1) // 2
        peers[full[i]].add(full[parent])
        peers[full[parent]].add(full[i])
    members = sorted(f for f, c in zip(full, is_caller) if not c)
    callers = sorted(f for f, c in zip(full, is_caller) if c)
    for index, caller in enumerate(callers):
        for j in aperture(len(members), k, index, len(callers)):
            peers[caller].add(members[j])
            peers[members[j]].add(caller)
    return peers


class Tables:
    """Every node's peer table, from its stdout events."""

    def __init__(self, full_names):
        self.peers = {f: set() for f in full_names}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.downs = 0

    def event(self, reporter, line):
        try:
            ev = json.loads(line)
        except ValueError:
            return
        with self.lock:
            kind = ev.get("event")
            if kind == "ready":
                self.peers[reporter].update(ev.get("peers", []))
            elif kind == "node_up":
                self.peers[reporter].add(ev["node"])
            elif kind == "node_down":
                self.peers[reporter].discard(ev["node"])
                self.downs += 1
            elif kind == "events_lagged":
                self.peers[reporter] = set(ev.get("peers", []))
            self.changed.notify_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpclb", default="target/release/rpclb", help="the rpclb binary")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--subset", type=int, default=8, help="K, the callers' subset size")
    ap.add_argument("--timeout", type=float, default=120.0, help="bound of the settle wait, s")
    ap.add_argument("--idle-secs", type=float, default=10.0)
    ap.add_argument("--settle-secs", type=float, default=3.0,
                    help="pause after settling before idle CPU is measured")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()

    n = args.nodes
    is_caller = [i % 4 == 0 for i in range(n)]
    names = [("caller" if c else "member") + f"_{i:03}" for i, c in enumerate(is_caller)]
    full = [f"{x}@127.0.0.1" for x in names]
    expected = expected_graph(names, is_caller, args.subset)
    ports = free_ports(n)
    logdir = tempfile.mkdtemp(prefix="subset_mesh.")
    tables = Tables(full)
    procs = []

    def spawn(i):
        cmd = [args.rpclb, "node", "--name", names[i], "--listen", f"127.0.0.1:{ports[i]}",
               "--exit-with-stdin", "--sparse-mesh", "--balancer", "b", "--node-match",
               "member", "--algorithm", "round_robin"]
        if i > 0:
            cmd += ["--peer", f"127.0.0.1:{ports[(i - 1) // 2]}"]
        if is_caller[i]:
            cmd += ["--subset-size", str(args.subset)]
        err = open(os.path.join(logdir, f"{names[i]}.log"), "w")
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                             text=True, bufsize=1)
        err.close()
        procs.append(p)

        def read():
            for line in p.stdout:
                tables.event(full[i], line)

        threading.Thread(target=read, daemon=True).start()

    result = {"nodes": n, "callers": sum(is_caller), "members": n - sum(is_caller),
              "subset": args.subset}
    sizes = sorted(len(p) for p in expected.values())
    result["expected_max_median"] = [sizes[-1], statistics.median(sizes)]
    m, callers = n - sum(is_caller), sum(is_caller)
    held = [0] * m
    for c in range(callers):
        for j in aperture(m, args.subset, c, callers):
            held[j] += 1
    result["subsets_per_member_min_max"] = [min(held), max(held)]
    try:
        start = time.monotonic()
        for i in range(n):
            spawn(i)
        deadline = start + args.timeout
        settled = None
        with tables.lock:
            while time.monotonic() < deadline:
                if tables.peers == expected:
                    settled = time.monotonic()
                    break
                tables.changed.wait(timeout=0.5)
            downs_at_settle = tables.downs
        result["settle_secs"] = None if settled is None else round(settled - start, 3)
        if settled is not None and args.idle_secs > 0:
            time.sleep(args.settle_secs)
            tck = os.sysconf("SC_CLK_TCK")
            pids = [p.pid for p in procs]
            t0, c0 = time.monotonic(), sum(cpu_ticks(pid) for pid in pids)
            time.sleep(args.idle_secs)
            t1, c1 = time.monotonic(), sum(cpu_ticks(pid) for pid in pids)
            cores = (c1 - c0) / tck / (t1 - t0)
            result["idle_cpu_cores"] = round(cores, 3)
            result["idle_cpu_pct_per_node"] = round(100 * cores / n, 3)
        with tables.lock:
            got = sorted(len(p) for p in tables.peers.values())
            result["sessions_max_median"] = [got[-1], statistics.median(got)]
            result["matches_expected"] = tables.peers == expected
            result["flaps"] = tables.downs - downs_at_settle
            if not result["matches_expected"]:
                result["differ"] = {
                    f: {"extra": sorted(tables.peers[f] - expected[f]),
                        "missing": sorted(expected[f] - tables.peers[f])}
                    for f in full if tables.peers[f] != expected[f]}
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(logdir, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    sys.exit(main())
