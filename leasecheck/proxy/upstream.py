"""Where the real server is, from a DSN (TCP or a Unix socket directory) or (host, port).

The embedded test server listens on a Unix socket only, so both kinds are reached.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from leasecheck.dbfixtures.redact import Dsn

DEFAULT_PORT = 5432
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Upstream:
    """The server's address: a TCP host and port, or a Unix socket's path."""

    host: str
    port: int

    @property
    def unix_path(self) -> str | None:
        """The socket's path when `host` is a directory (libpq's rule), else None."""
        if self.host.startswith("/") or self.host.startswith("@"):
            return f"{self.host}/.s.PGSQL.{self.port}"
        return None

    @classmethod
    def parse(cls, upstream: str | tuple[str, int]) -> Upstream:
        if isinstance(upstream, tuple):
            return cls(upstream[0], int(upstream[1]))
        params = {k: str(v) for k, v in conninfo_to_dict(upstream).items()}
        host = params.get("hostaddr") or params.get("host") or os.environ.get("PGHOST")
        if not host:
            raise ValueError(
                "the upstream DSN names no host: give host=... (a name, an address or a "
                "Unix socket directory)"
            )
        port = params.get("port") or os.environ.get("PGPORT") or str(DEFAULT_PORT)
        return cls(host.split(",")[0], int(port.split(",")[0]))

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        path = self.unix_path
        if path is not None:
            return await asyncio.open_unix_connection(path)
        return await asyncio.open_connection(self.host, self.port)

    def __str__(self) -> str:
        return self.unix_path or f"{self.host}:{self.port}"


def endpoint_dsn(base_dsn: str, port: int) -> str:
    """Return `base_dsn` aimed at a proxy port on the loopback, without TLS."""
    params = {k: str(v) for k, v in conninfo_to_dict(base_dsn).items()}
    params.pop("hostaddr", None)
    params.update(host=LOOPBACK, port=str(port), sslmode="disable")
    return Dsn(make_conninfo("", **params))
