"""Chaos soak: real worker processes, a nemesis, and a verdict on what was lost or duplicated."""
