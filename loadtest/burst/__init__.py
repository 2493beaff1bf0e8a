"""The burst generator (`python -m loadtest.burst.main`): N clients at one instant on the claim
endpoint (or the PostgreSQL baseline), with its client, its ledger view and its report."""
