"""The queue's own clients on the pool's sessions (`contract.Clients`).

A session of a queue that opens its own connections has an endpoint of its own on the
stepping proxy; its client is opened there at the session's first call (`ready`),
closed when the session goes back to the pool (a client is never handed to another
example), and dies with it: a crash drops the endpoint, and a call of the client's
that goes on into its dead connections is ended as the process's death would end it
(`die`). The harness's own connection of the session goes straight to the server.
"""

from __future__ import annotations

import contextlib
import itertools
from concurrent.futures import wait as wait_futures

from psycopg.conninfo import make_conninfo

from leasecheck.proxy import Endpoint, Proxy, ProxyError
from leasecheck.stateful import clock
from leasecheck.stateful.contract import Clients, HarnessFault
from leasecheck.stateful.engine.ending import GRACE, raise_in
from leasecheck.stateful.engine.session import Session

_ENDPOINTS = itertools.count(1)
"""Names the proxy's endpoints, one per client session."""


def endpoint(proxy: Proxy) -> Endpoint:
    """A new endpoint of `proxy` for one session's client."""
    return proxy.endpoint(f"client-{next(_ENDPOINTS)}")


def ready(session: Session, clients: Clients, dsn: str, settings: bool) -> None:
    """Open the session's client, if it has none yet: only at its first call, as a
    worker's heartbeat session most examples never use would cost a connection."""
    if session.client is not None:
        return
    assert session.endpoint is not None
    # now() is simulated time on its connections too, and where the harness may set
    # it, PostgreSQL breaks no lock cycle by itself (the pool's `_DEADLOCK_TIMEOUT`)
    options = clock.OPTIONS + (" -c deadlock_timeout=1h" if settings else "")
    conninfo = make_conninfo(session.endpoint.dsn(dsn), options=options)
    session.client = clients.connect(session.endpoint.name, conninfo)


def all_closed(session: Session, proxy: Proxy) -> bool:
    """Wait until every connection of the session's endpoint closed, and forget them;
    return False if one stays open (a library that keeps one past its close)."""
    gone = session.endpoint
    assert gone is not None
    try:
        proxy.wait_until(lambda: not gone.sessions(), GRACE, "its connections to close")
    except ProxyError:
        return False
    gone.forget_closed()
    return True


def disconnect(session: Session, clients: Clients) -> None:
    """Close the session's client; its connections may be dead (no verdict)."""
    if session.client is None:
        return
    client, session.client = session.client, None
    if session.endpoint is not None:
        session.endpoint.stepped = False  # its goodbyes pass
    with contextlib.suppress(Exception, HarnessFault):  # a carrier that failed closes nothing
        clients.disconnect(client)


def die(session: Session, clients: Clients, deadline: float) -> None:
    """End a terminated client session's call as its process's death would.

    A library's call may go on into the dead connection: a retry loop, a pool
    waiting to reconnect to the address the harness dropped (dramatiq-postgres's
    `retry_pg` waits up to minutes). None of it can reach the server, and a dead
    process runs none of it, so it is not waited for: the client is closed (its
    pool's waiters wake up refused), and a call that still goes on is ended in its
    thread. Its outcome is the harness's doing, `Lost`, never the queue's answer."""
    assert session.pending is not None
    wait_futures([session.pending], timeout=GRACE)
    if not session.pending.done():
        disconnect(session, clients)
        wait_futures([session.pending], timeout=GRACE)
    if not session.pending.done() and session.thread is not None:
        raise_in(session.thread)
        wait_futures([session.pending], timeout=deadline)
