"""The engine that plays: sessions, the call scheduler, simulated workers and their moves."""
