"""The engine's vocabulary, pure (no Redis, no I/O): the two automata's states, the errors, the
outbox record, every key's name, the stored holds and charges as read, stock lines, event
details, order numbers, the scripts' reply codes, signatures, merchant notifications and the
invariants' audit. Everything else in the engine stands on it; it imports nothing above."""
