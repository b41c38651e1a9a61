"""The pytest wing: what runs the properties as pytest items in a user's own run.

Its hooks (`plugin`, pytest's entry point), its options (`options`), how the run is
split (`shards`, `items`), what it writes (`outdir`, `reports`, `runreport`), what it
says a run exercised (`exercised`) and runs of many runs (`campaign`). Its modules share
public names only; the properties themselves live in `leasecheck.suite`.
"""
