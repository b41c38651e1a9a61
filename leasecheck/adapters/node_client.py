"""A Node.js library's own client, hosted in one Node.js process and called by JSON lines.

For queues written in JavaScript, `contract.Clients` can run the library itself. One
`node SCRIPT NODE_MODULES ARGS...` process (a script in `leasecheck/adapters/npm/`) hosts
the library's clients of every session: `connect` opens one there (`op: "open"`, with the
session's connection as node-postgres's config), each contract call is one JSON line
naming it, answered by one line with the same id, and `disconnect` closes it. Each client
opens its connections with the library's own driver and sends the library's own
statements, which the harness steps on the wire like any other client's; the sessions
share the process only, never a connection. (A process per session would cost more than
the calls: about half a second of CPU to start Node.js and the library.)

A call's answer is `{"ok": value}` or `{"error": message, "code": code}`: an error is the
library's answer, raised as `NodeCallError`. A process that dies fails every call in
flight, and every later one, with `NodeHostGone`: a `HarnessFault`, never the library's
answer (the run stops with no verdict).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from leasecheck.adapters._node import SCRIPTS, NodeError
from leasecheck.stateful.contract import HarnessFault

WAKE = 0.05
"""Seconds between two looks at a call's answer (see `NodeHost.call`)."""
CLOSE = 5.0
"""Seconds a client's close may take (its pool ending) before it is given up."""

_KEYS = {"host": "host", "port": "port", "user": "user", "password": "password",
         "dbname": "database", "options": "options"}  # fmt: skip
"""libpq's conninfo keys and node-postgres's names for them."""


class NodeHostGone(HarnessFault):
    """The node process exited under its clients: no later call of theirs is answered
    by the library, so none is judged (the run stops, no verdict)."""


class NodeCallError(RuntimeError):
    """The library raised: its error's message (and code, when it has one)."""

    def __init__(self, message: str, code: str | None) -> None:
        super().__init__(message if code is None else f"{message} [{code}]")
        self.code = code


def node_config(dsn: str) -> dict[str, Any]:
    """node-postgres's connection config for a libpq conninfo (its `options` kept, no TLS)."""
    given = conninfo_to_dict(dsn)
    if given.pop("sslmode", "disable") != "disable":
        raise NodeError("only sslmode=disable is taken (node-postgres's ssl: false)")
    unknown = sorted(set(given) - set(_KEYS))
    if unknown:
        raise NodeError(f"conninfo keys {', '.join(unknown)} have no node-postgres equivalent")
    config: dict[str, Any] = {_KEYS[k]: str(v) for k, v in given.items()}
    if "port" in config:
        config["port"] = int(config["port"])
    return config


class NodeHost:
    """One `node` process running `script`; calls from any thread, answered by id."""

    def __init__(self, script: str, modules: Path, *args: str) -> None:
        node = shutil.which("node")
        if node is None:
            raise NodeError("node not found on PATH: install Node.js (20 or later)")
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (its last words, read to the end)
        self.process = subprocess.Popen(
            [node, str(SCRIPTS / script), str(modules), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._ids = itertools.count(1)
        self._clients = itertools.count(1)
        self._waiting: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._gone: str | None = None
        threading.Thread(target=self._read, name="leasecheck-node", daemon=True).start()
        atexit.register(self.close)

    def open(self, dsn: str) -> NodeClient:
        """Open a client of the library's on `dsn`, in this process."""
        client = NodeClient(self, next(self._clients))
        self.call(client.number, "open", pg=node_config(dsn))
        return client

    def call(self, client: int, op: str, within: float | None = None, **args: Any) -> Any:
        """Send one call of `client`'s; return its `ok` value, or raise the library's error
        (`NodeError` if `within` seconds pass first)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._gone is not None:
                raise NodeHostGone(f"the node process exited: {self._gone}")
            number = next(self._ids)
            self._waiting[number] = future
            stdin = self.process.stdin
            assert stdin is not None
            try:
                stdin.write(json.dumps({"id": number, "client": client, "op": op, **args}) + "\n")
                stdin.flush()
            except OSError:
                del self._waiting[number]
                raise NodeHostGone(f"the node process exited: {self._last_words()}") from None
        # Short waits, so that the harness can end a call that goes on past its deadline
        # (an exception raised in this thread lands between two of them, not inside one).
        until = None if within is None else time.monotonic() + within
        while until is None or time.monotonic() < until:
            try:
                return future.result(timeout=WAKE)
            except TimeoutError:
                continue
        raise NodeError(f"{op} of client {client} did not answer within {within:g} s")

    def _read(self) -> None:
        """Hand each answer to the call waiting for it; fail them all when the process ends."""
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            answer: dict[str, Any] = json.loads(line)
            with self._lock:
                future = self._waiting.pop(int(answer["id"]))
            if "error" in answer:
                future.set_exception(NodeCallError(str(answer["error"]), answer.get("code")))
            else:
                future.set_result(answer.get("ok"))
        self.process.wait()
        with self._lock:
            self._gone = self._last_words()
            waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            future.set_exception(NodeHostGone(f"the node process exited: {self._gone}"))

    def _last_words(self) -> str:
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit status {self.process.poll()}"

    def close(self) -> None:
        """End the process (every client's connections go with it)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()


class NodeClient:
    """One client of the library's in a `NodeHost`, named by its number there."""

    def __init__(self, host: NodeHost, number: int) -> None:
        self.host = host
        self.number = number

    def call(self, op: str, **args: Any) -> Any:
        """Make one call of this client's (see `NodeHost.call`)."""
        return self.host.call(self.number, op, **args)

    def close(self) -> None:
        """Close the client: its pool ends and its connections close. Bounded: the harness
        closes a crashed session's client from its own thread, which must go on."""
        with contextlib.suppress(NodeHostGone):  # its connections went with its process
            self.host.call(self.number, "close", within=CLOSE)
