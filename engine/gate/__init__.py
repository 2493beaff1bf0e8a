"""The sold-out gate in front of the store's claim (ADR 0012): the memory of sold-out events,
the per-event gate of claims in flight, and GatedClaims, which wraps the store's claim in both."""
