"""Adapters: third-party queues (and queues written as SQL files) driven through the contract."""
