"""The composition root: the `onsale` command, the one module allowed to import every layer of
the product (engine, api, persistence). Tools (demo, simulator, load tests) live in loadtest/."""
