"""The Node.js host of a library's clients (`adapters.node_client`): when its process
exits, every call says so as a `HarnessFault`, never as the library's answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from leasecheck.adapters.node_client import NodeClient, NodeHost, NodeHostGone
from leasecheck.stateful.contract import HarnessFault

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def test_a_host_whose_process_exited_fails_every_call_as_a_harness_fault() -> None:
    """host.mjs alone serves nothing: the process ends at once, as a crashed host would."""
    host = NodeHost("host.mjs", Path("."))
    try:
        host.process.wait(timeout=30)
        with pytest.raises(NodeHostGone, match="the node process exited") as gone:
            host.call(1, "fetch")
        assert isinstance(gone.value, HarnessFault)
        with pytest.raises(NodeHostGone):
            host.open("host=127.0.0.1 port=1 dbname=x user=x sslmode=disable")
        NodeClient(host, 1).close()  # closing a client of a dead host is no error
    finally:
        host.close()
