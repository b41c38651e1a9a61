"""A stepping proxy for the PostgreSQL wire protocol (v3): any client, any language.

A queue library that opens its own connections is handed a DSN through the proxy
(`Proxy.endpoint(name).dsn(...)`); every round trip it sends can then be held at its
session's gate until the controller lets it go, so other workers act between any two
of its round trips, whatever driver it speaks through.
"""

from __future__ import annotations

from leasecheck.proxy.endpoint import Endpoint
from leasecheck.proxy.errors import NotHeld, ProxyClosed, ProxyError, ProxyTimeout
from leasecheck.proxy.server import Proxy
from leasecheck.proxy.session import Session, Snapshot

__all__ = [
    "Endpoint",
    "NotHeld",
    "Proxy",
    "ProxyClosed",
    "ProxyError",
    "ProxyTimeout",
    "Session",
    "Snapshot",
]
