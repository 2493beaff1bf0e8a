"""The waiting room in front of T0 (ADR 0029): the room, its draw anyone can check (ADR 0040),
its admissions' tokens, its refusals, and its restore from the ledger."""
