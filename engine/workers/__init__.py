"""`onsale worker`: the sweeper, the trimmer of ended holds, the refund queue and provider
reconciliation, each a loop over the store, and their Prometheus series."""
