"""Locust scenarios (locustfile) and their runner and report (`make locust-burst`,
`make locust-flow`)."""
