"""Load tooling: Locust scenarios and the T0 burst generator."""
