"""The chaos run (`onsale chaos`, `python -m loadtest.chaos.main`): the demo's stack under kill -9
faults of every process on a schedule, with its checks and its report."""
