"""Benchmark (not a test): what the stepping proxy adds to a step and to a round trip.

    python -m bench.proxy_cost [--examples N] [--rounds R] [--pg-dsn DSN] [--json PATH]

Runs the same derandomized examples against the reference queue three ways, alternating
`R` times so a machine that drifts under load drifts for all: every harness session
connected straight to the server; relayed through one free endpoint of the proxy
(`leasecheck.proxy`: every round trip relayed, none held, pauses still psycopg's); and
wired, each session on an endpoint of its own with its calls paused on the wire
(`WireGate`). It also times a trivial query direct and relayed (one round trip). The
goal is a step through the proxy at most 1.5x the same step direct: a queue on
connections of its own would then cost at most half as much again as one on the
harness's. The runs through the proxy are also a check of it: the harness crashes,
cuts, cancels and blocks sessions through it, and every example must pass as direct.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench._db import reference_database
from bench.step_cost import _round_trip, _run
from leasecheck.proxy import Proxy

GOAL = 1.5
"""A step through the proxy should cost at most this multiple of the same step direct."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-proxy-cost.json"))
    args = parser.parse_args()
    direct: list[float] = []
    proxied: list[float] = []
    wired: list[float] = []
    trips: dict[str, list[float]] = {"direct": [], "proxied": []}
    steps: set[int] = set()
    with reference_database(args.pg_dsn) as dsn, Proxy(dsn) as proxy:
        through = proxy.endpoint("bench").dsn(dsn)
        for _ in range(args.rounds):
            for label, target, times in (("direct", dsn, direct), ("proxied", through, proxied)):
                _, n, seconds = _run(target, args.examples)
                steps.add(n)
                times.append(seconds / n)
                trips[label].append(_round_trip(target, 500))
            _, n, seconds = _run(dsn, args.examples, proxy)
            steps.add(n)
            wired.append(seconds / n)
        errors = proxy.errors
    if len(steps) != 1:
        raise SystemExit(f"the runs took different numbers of steps: {sorted(steps)}")
    if errors:
        raise SystemExit(f"the proxy met {len(errors)} errors of its own: {errors[0]!r}")
    step_direct, step_proxied = statistics.median(direct), statistics.median(proxied)
    step_wired = statistics.median(wired)
    trip_direct, trip_proxied = min(trips["direct"]), min(trips["proxied"])
    result: dict[str, Any] = {
        "examples": args.examples,
        "steps": steps.pop(),
        "rounds": args.rounds,
        "step_direct_us": step_direct * 1e6,
        "step_proxied_us": step_proxied * 1e6,
        "step_ratio": step_proxied / step_direct,
        "step_wired_us": step_wired * 1e6,
        "step_wired_ratio": step_wired / step_direct,
        "round_trip_direct_us": trip_direct * 1e6,
        "round_trip_proxied_us": trip_proxied * 1e6,
        "round_trip_added_us": (trip_proxied - trip_direct) * 1e6,
        "goal": GOAL,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(
        f"{result['examples']} examples x {args.rounds} rounds, {result['steps']} steps each way\n"
        f"one step:       {result['step_direct_us']:>8,.0f} us direct, "
        f"{result['step_proxied_us']:>8,.0f} us relayed, "
        f"{result['step_wired_us']:>8,.0f} us wired (medians of the rounds)\n"
        f"one round trip: {result['round_trip_direct_us']:>8,.0f} us direct, "
        f"{result['round_trip_proxied_us']:>8,.0f} us through the proxy (best of the rounds)"
    )
    for how, ratio in (("relayed", result["step_ratio"]), ("wired", result["step_wired_ratio"])):
        verdict = "met" if ratio <= GOAL else "not met"
        print(f"a step {how} through the proxy costs {ratio:.2f}x (goal {GOAL:g}x: {verdict})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
