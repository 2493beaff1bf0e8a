"""The store: every state change is one Lua script call on an event's keys (engine/store/
transitions.py `Store`), and the reads, the runner, the scripts' library, auto-pipelining,
the cluster's and the replicas' rules, and the facets a store hands out (lifecycle, stock,
restore, policies, prices, refunds of parts of orders, notes). It stands on engine/model only."""

from engine.store.transitions import Store

__all__ = ["Store"]
