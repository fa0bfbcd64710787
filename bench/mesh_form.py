#!/usr/bin/env python3
"""How fast a cluster of real `rpclb node` processes forms a full mesh (issue 21).

Starts N `rpclb node` processes on 127.0.0.1 (free ports picked here), every node but the
hub given `--peer <hub>` (a star), and reads each node's stdout events (`node_up`,
`node_down`) as they come. Reports:

* `mesh_secs`: from spawning the nodes (with `--hub`: from spawning the rest, once the hub
  was ready) until every node's peer table (the peers it reported up and not down since)
  holds all N-1 others; `None` if not within `--timeout`;
* `secs_to_50_90_99_pct`: when the peer tables together first held 50 %, 90 % and 99 % of
  all N·(N-1) entries;
* `flaps`: `node_down` lines seen before the mesh was complete (a peer lost while forming);
* `name_taken`: log lines of nodes that concluded their name was taken (`this node's name is
  taken`), and `duplicate_rejections` (`rejecting a second node with the same name`);
* `heartbeat_closes`: log lines `peer did not answer heartbeats; closing its session`;
* `idle_cpu_cores`: CPU time of all nodes together over `--idle-secs` after meshing (from
  /proc/<pid>/stat, utime+stime), in cores (1.0 = one core busy all the time);
* with `--stop`: `stop_drop_secs`, from SIGSTOP of one node (not the hub) until every other
  node reported it down; `None` if not within `--timeout`.

The nodes log at the default level (warnings) to one file each in a temporary directory,
which is deleted unless `--keep-logs`. Only processes started here are signalled; every
node runs with `--exit-with-stdin`, so it also ends if this script dies.

Usage (a release build: `cargo build --release -p rpclb`):

    python3 bench/mesh_form.py --nodes 64 [--hub] [--stop] [--json] [--rpclb target/release/rpclb]
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1, below the kernel's ephemeral range (so that no
    node's outgoing connection takes one before its node listens on it)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except OSError:
        pass
    rng = random.Random()
    ports = []
    while len(ports) < n:
        port = rng.randrange(max(1024, low - 12000), low)
        if port in ports:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            ports.append(port)
        except OSError:
            pass
        finally:
            s.close()
    return ports


def cpu_ticks(pid):
    """utime + stime of `pid` in clock ticks, or 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


def count_logs(logdir, names):
    """Counts of the log lines of interest over all nodes' logs so far."""
    counts = {"name_taken": 0, "duplicate_rejections": 0, "heartbeat_closes": 0}
    for name in names:
        with open(os.path.join(logdir, f"{name}.log"), errors="replace") as f:
            for line in f:
                if "this node's name is taken" in line:
                    counts["name_taken"] += 1
                if "rejecting a second node with the same name" in line:
                    counts["duplicate_rejections"] += 1
                if "did not answer heartbeats" in line:
                    counts["heartbeat_closes"] += 1
    return counts


class Mesh:
    """The peer tables of all nodes, from their stdout events."""

    def __init__(self, names):
        self.names = names
        self.full = {n: f"{n}@127.0.0.1" for n in names}
        self.peers = {n: set() for n in names}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.downs = []  # (time, reporter, node)
        self.ups = 0
        self.meshed_at = None
        self.edges = 0  # sum of the peer tables' sizes
        self.crossed = {}  # fraction of the full mesh -> first time reached

    def event(self, reporter, line):
        try:
            ev = json.loads(line)
        except ValueError:
            return
        now = time.monotonic()
        with self.lock:
            kind = ev.get("event")
            if kind == "ready":
                for p in ev.get("peers", []):
                    self.peers[reporter].add(p)
            elif kind == "node_up":
                self.ups += 1
                self.peers[reporter].add(ev["node"])
            elif kind == "node_down":
                self.peers[reporter].discard(ev["node"])
                self.downs.append((now, reporter, ev["node"]))
            elif kind == "events_lagged":
                self.peers[reporter] = set(ev.get("peers", []))
            self.edges = sum(len(p) for p in self.peers.values())
            full = len(self.names) * (len(self.names) - 1)
            for frac in (0.5, 0.9, 0.99):
                if frac not in self.crossed and self.edges >= frac * full:
                    self.crossed[frac] = now
            if self.meshed_at is None and self.complete():
                self.meshed_at = now
            self.changed.notify_all()

    def complete(self):
        want = len(self.names) - 1
        return all(len(p) >= want for p in self.peers.values())

    def counts(self):
        with self.lock:
            return sorted(len(p) for p in self.peers.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpclb", default="target/release/rpclb", help="the rpclb binary")
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--hub", action="store_true",
                    help="start the hub first and the rest once it is ready")
    ap.add_argument("--stop", action="store_true",
                    help="after meshing, SIGSTOP one node and time until all others drop it")
    ap.add_argument("--timeout", type=float, default=120.0, help="bound of each wait, s")
    ap.add_argument("--idle-secs", type=float, default=10.0,
                    help="how long idle CPU is measured after meshing (0: not measured)")
    ap.add_argument("--settle-secs", type=float, default=2.0,
                    help="pause after meshing before idle CPU is measured")
    ap.add_argument("--node-arg", action="append", default=[],
                    help="one more argument for every node (repeat)")
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()

    n = args.nodes
    names = [f"m{i}" for i in range(n)]
    ports = free_ports(n)
    hub = f"127.0.0.1:{ports[0]}"
    logdir = tempfile.mkdtemp(prefix="mesh_form.")
    mesh = Mesh(names)
    procs = {}
    readers = []

    def spawn(i):
        cmd = [args.rpclb, "node", "--name", names[i], "--listen", f"127.0.0.1:{ports[i]}",
               "--exit-with-stdin"]
        if i != 0:
            cmd += ["--peer", hub]
        cmd += args.node_arg
        err = open(os.path.join(logdir, f"{names[i]}.log"), "w")
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                             text=True, bufsize=1)
        err.close()
        procs[names[i]] = p

        def read():
            for line in p.stdout:
                mesh.event(names[i], line)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        readers.append(t)

    result = {"nodes": n, "hub_first": args.hub}
    try:
        if args.hub:
            spawn(0)
            hub_ready = time.monotonic() + args.timeout
            while time.monotonic() < hub_ready:
                try:
                    with socket.create_connection(("127.0.0.1", ports[0]), timeout=0.2):
                        break
                except OSError:
                    time.sleep(0.05)
            start = time.monotonic()
            for i in range(1, n):
                spawn(i)
        else:
            start = time.monotonic()
            for i in range(n):
                spawn(i)
        deadline = start + args.timeout
        with mesh.lock:
            while mesh.meshed_at is None and time.monotonic() < deadline:
                mesh.changed.wait(timeout=0.5)
            meshed_at = mesh.meshed_at
            flaps = len(mesh.downs)
        result["mesh_secs"] = None if meshed_at is None else round(meshed_at - start, 3)
        with mesh.lock:
            result["secs_to_50_90_99_pct"] = [
                round(mesh.crossed[f] - start, 3) if f in mesh.crossed else None
                for f in (0.5, 0.9, 0.99)]
        result["flaps"] = flaps
        counts = mesh.counts()
        result["peers_min_max"] = [counts[0], counts[-1]]
        if meshed_at is not None and args.idle_secs > 0:
            time.sleep(args.settle_secs)
            tck = os.sysconf("SC_CLK_TCK")
            pids = [p.pid for p in procs.values()]
            t0, c0 = time.monotonic(), sum(cpu_ticks(pid) for pid in pids)
            time.sleep(args.idle_secs)
            t1, c1 = time.monotonic(), sum(cpu_ticks(pid) for pid in pids)
            result["idle_cpu_cores"] = round((c1 - c0) / tck / (t1 - t0), 3)
            with mesh.lock:
                result["flaps_after_mesh"] = len(mesh.downs) - flaps
        if meshed_at is not None and args.stop:
            # What the nodes logged while forming and idling (the stop adds heartbeat closes).
            result["logs_before_stop"] = count_logs(logdir, names)
            victim = names[-1]
            full = mesh.full[victim]
            with mesh.lock:
                before = len(mesh.downs)
            stopped = time.monotonic()
            procs[victim].send_signal(signal.SIGSTOP)
            others = set(names) - {victim}
            with mesh.lock:
                while time.monotonic() < stopped + args.timeout:
                    dropped = {r for (_, r, node) in mesh.downs[before:] if node == full}
                    if dropped >= others:
                        last = max(t for (t, r, node) in mesh.downs[before:] if node == full)
                        result["stop_drop_secs"] = round(last - stopped, 3)
                        break
                    mesh.changed.wait(timeout=0.2)
                else:
                    result["stop_drop_secs"] = None
                    result["stop_dropped_by"] = len(
                        {r for (_, r, node) in mesh.downs[before:] if node == full})
            procs[victim].send_signal(signal.SIGCONT)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        for p in procs.values():
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    if "logs_before_stop" not in result:
        result.update(count_logs(logdir, names))
    else:
        result.update(result.pop("logs_before_stop"))
    if args.keep_logs:
        result["logs"] = logdir
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:22} {v}")


if __name__ == "__main__":
    sys.exit(main())
