"""What the proxy's controller raises: each message says what happened and what to do."""

from __future__ import annotations


class ProxyError(Exception):
    """A control operation of the proxy could not be done."""


class ProxyTimeout(ProxyError, TimeoutError):
    """A bounded wait of the controller ran out."""


class NotHeld(ProxyError):
    """`release()` of a session with no unit at its gate."""


class ProxyClosed(ProxyError):
    """The proxy was closed (or never started)."""
