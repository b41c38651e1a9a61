"""Simulated time's units and the harness's fixed durations (integer microseconds)."""

from __future__ import annotations

SECOND = 1_000_000
LEASE = 30 * SECOND
"""The lease every claim asks for."""
BEAT = 10 * SECOND
"""How often a running worker's heartbeat fires."""
