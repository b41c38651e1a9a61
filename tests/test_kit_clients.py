"""The kit on a queue that opens its own connections (`contract.Clients`): its workers'
calls get clients of their own, in the round trip as in the search (the machine's
sessions are then the queue's clients, through the stepping proxy)."""

from __future__ import annotations

from leasecheck import kit
from tests.own_clients import OwnClientQueue

adapter_dsn, pool, conn = kit.fixtures(OwnClientQueue, "kit_clients")


class TestAQueueOnItsOwnClients(kit.AdapterTests):
    queue = OwnClientQueue
    examples = 15
