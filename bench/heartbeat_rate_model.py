#!/usr/bin/env python3
"""How many heartbeat round trips an idle pair of full-mesh nodes needs (issue 21's idle goal).

A model, not a measurement. Two idle nodes A and B joined by one ractor_cluster session:

* each end of the session runs ractor_cluster's own ping loop (0.16.5, `node/node_session.rs`):
  it sleeps a uniform random 1-5 s, sends a Ping; the other end answers with a Pong. A node
  therefore reads something from its peer at the peer's pings and at the pongs to its own;
* reading anything from a peer counts as hearing from it (this library's heartbeat module);
* network and scheduling delays are `rtt` (2 ms by default), nothing is lost, nobody pauses.

Policies compared (round trips per pair per second, over `--seconds` of simulated time):

* `library`: what `node/heartbeat.rs` does — every `interval` (1 s, a random phase per node)
  a node sends a heartbeat to a peer unless that peer's own heartbeat reached it within 1.5
  intervals or something was read from the peer within half an interval. A live peer has
  two intervals to answer before `heartbeat_timeout` (3 s), and a second heartbeat one
  interval later.
* `threshold T`: a node sends a heartbeat exactly when it has not heard from the peer for T
  seconds (no ticks); a live peer then has `timeout - T` to answer.

Deterministic: seeded (`--seed`). Usage: `python3 bench/heartbeat_rate_model.py [--seconds S]`.
"""

import argparse
import heapq
import random

TIMEOUT = 3.0
INTERVAL = 1.0


def ractor_ping_gap(rng):
    return rng.uniform(1.0, 5.0)


def threshold_policy(threshold, seconds, seed, rtt):
    rng = random.Random(seed)
    heard = [0.0, 0.0]  # heard[s]: when node s last heard from the other
    in_flight = [False, False]
    events = []
    for s in (0, 1):
        heapq.heappush(events, (ractor_ping_gap(rng), "ping", s))
    probes = 0
    now = 0.0
    while now < seconds:
        due = [(heard[s] + threshold, s) for s in (0, 1) if not in_flight[s]]
        next_probe = min(due) if due else (float("inf"), 0)
        if events[0][0] <= next_probe[0]:
            now, kind, s = heapq.heappop(events)
            other = 1 - s
            if kind == "ping":
                heard[other] = max(heard[other], now)
                heard[s] = max(heard[s], now + rtt)  # the pong
                heapq.heappush(events, (now + ractor_ping_gap(rng), "ping", s))
            else:  # the heartbeat's answer
                heard[s] = max(heard[s], now)
                in_flight[s] = False
        else:
            now, s = next_probe
            probes += 1
            in_flight[s] = True
            heard[1 - s] = max(heard[1 - s], now + rtt / 2)
            heapq.heappush(events, (now + rtt, "answer", s))
    return probes / seconds


def library_policy(seconds, seed, rtt):
    rng = random.Random(seed)
    last_read = [-9.0, -9.0]
    their_heartbeat = [-9.0, -9.0]
    events = []
    for s in (0, 1):
        heapq.heappush(events, (ractor_ping_gap(rng), "ping", s))
        heapq.heappush(events, (rng.uniform(0, INTERVAL), "tick", s))
    probes = 0
    now = 0.0
    while now < seconds:
        now, kind, s = heapq.heappop(events)
        other = 1 - s
        if kind == "ping":
            last_read[other] = now
            last_read[s] = now + rtt
            heapq.heappush(events, (now + ractor_ping_gap(rng), "ping", s))
        else:
            heapq.heappush(events, (now + INTERVAL, "tick", s))
            skip = (now - their_heartbeat[s] < 1.5 * INTERVAL
                    or now - last_read[s] < 0.5 * INTERVAL)
            if not skip:
                probes += 1
                last_read[other] = now + rtt / 2
                their_heartbeat[other] = now + rtt / 2
                last_read[s] = now + rtt
    return probes / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20000.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rtt", type=float, default=0.002)
    args = ap.parse_args()
    pairs = 96 * 95 // 2
    ping_rate = 2 / 3.0  # both ends, a mean gap of 3 s
    print(f"ractor_cluster's pings: {ping_rate:.3f} round trips per pair per s "
          f"({ping_rate * pairs:,.0f}/s over the {pairs:,} pairs of 96 nodes)")
    print("policy | heartbeat round trips per pair per s | at 96 nodes, per s | a live peer's time to answer")
    rate = library_policy(args.seconds, args.seed, args.rtt)
    print(f"library (1 s interval) | {rate:.3f} | {rate * pairs:,.0f} | 2 s (a second heartbeat 1 s later)")
    for threshold in (1.0, 1.25, 1.5, 1.75, 2.0):
        rate = threshold_policy(threshold, args.seconds, args.seed, args.rtt)
        print(f"threshold {threshold} s | {rate:.3f} | {rate * pairs:,.0f} | {TIMEOUT - threshold:.2f} s")


if __name__ == "__main__":
    main()
