"""The verdict that judges: facts from the history, the oracle's properties, coverage."""
