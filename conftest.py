"""Thin on purpose: the fixture modules own their options, markers and fixtures."""

pytest_plugins = ["dbfixtures.plugin", "stateful.plugin"]
