"""A small leased job queue, written without leasecheck, to be checked by it."""
