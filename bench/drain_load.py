#!/usr/bin/env python3
"""What callers see when one member of a balancer is SIGTERMed under load (issue 22 item 4).

Starts 4 `rpclb node` processes on 127.0.0.1 (free ports picked here), each a member of the
balancer `work`, meshed through the first; then 2 `rpclb load` processes (each its own node,
a caller, not a member) calling `whoami` (not idempotent) through `work` with `--concurrency`
callers each for `--duration` seconds. `--sigterm-at` seconds after the loads start, the
member `--stop-index` (default the last, not the one the callers dial) gets SIGTERM, drains and
exits (with `--stop-balancer`: its balancer is stopped by `rpclb control stop_balancer`). Reports, per
caller process: calls, errors by kind (with a sample message), and calls per member; and the
stopped member's own `stopped` line (its drain report) and exit status.

Only processes started here are signalled; every node runs with `--exit-with-stdin`, so it
also ends if this script dies. Repeat with `--runs N` (each run a fresh cluster).

Usage (a release build: `cargo build --release -p rpclb`):

    python3 bench/drain_load.py [--rpclb target/release/rpclb] [--runs 5] [--delay-ms 0]
        [--leave-grace-ms 500] [--concurrency 16] [--duration 6] [--sigterm-at 2] [--json]
"""

import argparse
import json
import random
import socket
import subprocess
import sys
import time


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1, below the kernel's ephemeral range."""
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
        except OSError:
            continue
        finally:
            s.close()
        ports.append(port)
    return ports


def read_event(proc, event, timeout):
    """The first stdout JSON line of `proc` whose `event` is `event`, within `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if value.get("event") == event:
            return value
    return None


def one_run(args, cookie):
    ports = free_ports(4)
    nodes = []
    try:
        for i, port in enumerate(ports):
            cmd = [
                args.rpclb, "node", "--name", f"m{i}", "--listen", f"127.0.0.1:{port}",
                "--cookie", cookie, "--balancer", "work", "--exit-with-stdin",
                "--leave-grace-ms", str(args.leave_grace_ms),
            ]
            if args.delay_ms:
                cmd += ["--delay-ms", str(args.delay_ms)]
            if i > 0:
                cmd += ["--peer", f"127.0.0.1:{ports[0]}"]
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            nodes.append(proc)
            if read_event(proc, "ready", 10) is None:
                raise RuntimeError(f"member m{i} did not start")
        time.sleep(1.0)  # the mesh of 4 forms in well under this
        loads = []
        for c in range(2):
            cmd = [
                args.rpclb, "load", "--peer", f"127.0.0.1:{ports[0]}", "--cookie", cookie,
                "--balancer", "work", "--algorithm", args.algorithm,
                "--concurrency", str(args.concurrency), "--duration", str(args.duration),
                "--timeout-ms", str(args.timeout_ms), "--json",
            ]
            loads.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))
        time.sleep(args.sigterm_at)
        stopping = nodes[args.stop_index]
        signalled = time.monotonic()
        if args.stop_balancer:
            # Balancer::stop in the member's process, through the admin control request.
            index = args.stop_index % len(ports)
            reply = subprocess.run(
                [args.rpclb, "control", "--peer", f"127.0.0.1:{ports[index]}", "--cookie",
                 cookie, "--node", f"m{index}@127.0.0.1", "--json", "stop_balancer", "work"],
                capture_output=True, text=True, timeout=60)
            exited = time.monotonic() - signalled
            try:
                answer = json.loads(reply.stdout.strip().splitlines()[-1])
                stopped = {"drains": [answer.get("reply", answer)]}
            except (ValueError, IndexError):
                stopped = {"drains": [{"unparsed": reply.stdout + reply.stderr}]}
            status = reply.returncode
        else:
            stopping.send_signal(15)
            stopped = read_event(stopping, "stopped", 30)
            status = stopping.wait(timeout=30)
            exited = time.monotonic() - signalled
        reports = []
        for load in loads:
            out, _ = load.communicate(timeout=args.duration + 60)
            try:
                reports.append(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                reports.append({"unparsed": out[-500:]})
        return {
            "stopped_member": f"m{args.stop_index % len(ports)}@127.0.0.1",
        "stopped_by": "stop_balancer" if args.stop_balancer else "sigterm",
            "drain": stopped.get("drains") if stopped else None,
            "exit_status": status,
            "exited_after_s": round(exited, 3),
            "callers": [
                {
                    "calls": r.get("calls"),
                    "errors": r.get("errors"),
                    "error_samples": r.get("error_samples"),
                    "per_node": r.get("per_node"),
                }
                for r in reports
            ],
        }
    finally:
        for proc in nodes:
            if proc.poll() is None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc in nodes:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpclb", default="target/release/rpclb")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--leave-grace-ms", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--sigterm-at", type=float, default=2.0)
    parser.add_argument("--timeout-ms", type=int, default=10000)
    parser.add_argument("--algorithm", default="round_robin")
    parser.add_argument("--stop-index", type=int, default=3,
                        help="which member gets SIGTERM (0: the one the callers dial)")
    parser.add_argument("--stop-balancer", action="store_true",
                        help="stop the member's balancer (Balancer::stop, by `rpclb control "
                        "stop_balancer`) instead of SIGTERM to its process")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cookie = f"drain-{random.randrange(1 << 30)}"
    runs = [one_run(args, cookie) for _ in range(args.runs)]
    if args.json:
        print(json.dumps(runs))
        return
    for i, run in enumerate(runs, 1):
        drain = run["drain"][0] if run["drain"] else {}
        # With --stop-balancer the member keeps running: the status and time are those of
        # the `rpclb control stop_balancer` command, whose reply is the drain report.
        what = ("stop_balancer answered" if run["stopped_by"] == "stop_balancer"
                else "exit")
        print(f"run {i}: {run['stopped_member']} {what} {run['exit_status']} after "
              f"{run['exited_after_s']} s, drain {drain.get('outcome')} in {drain.get('took_ms')} ms")
        for c, caller in enumerate(run["callers"]):
            errors = sum((caller.get("errors") or {}).values())
            print(f"  caller{c}: {caller['calls']} calls, {errors} errors {caller['errors']} "
                  f"per member {caller['per_node']}")
            for kind, sample in (caller.get("error_samples") or {}).items():
                print(f"    {kind}: {sample}")


if __name__ == "__main__":
    sys.exit(main())
