"""The `onsale` command line."""

import argparse
import asyncio
import logging
import os
import sys

from redis.exceptions import ConnectionError as RedisConnectionError
from rich.console import Console

from engine.settings import MissingSetting, Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="onsale", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a scripted T0 burst against the engine")
    demo.add_argument("--clients", type=int, default=10_000)
    demo.add_argument("--seats", type=int, default=80)
    demo.add_argument("--hold-ttl-ms", type=int, default=3_000)
    demo.add_argument("--quarantine-ms", type=int, default=2_000)
    demo.add_argument("--seed", type=int, default=2026)
    sub.add_parser("sweep", help="run the sweeper (expiry and quarantine timeout) until killed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = Settings.from_env(os.environ)
    except MissingSetting as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "demo":
            from engine.demo import DemoConfig, run_demo

            cfg = DemoConfig(
                clients=args.clients,
                seats=args.seats,
                hold_ttl_ms=args.hold_ttl_ms,
                quarantine_ms=args.quarantine_ms,
                seed=args.seed,
            )
            return asyncio.run(run_demo(settings, cfg, Console()))
        return asyncio.run(_sweep(settings))
    except RedisConnectionError as exc:
        print(f"onsale: cannot reach Redis at {settings.redis_url}: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


async def _sweep(settings: Settings) -> int:
    from engine.store import Store
    from engine.sweeper import Sweeper

    client = settings.redis_client()
    store = Store(client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000)
    await store.scripts.load_all()
    sweeper = Sweeper(
        store,
        interval_ms=settings.sweep_interval_ms,
        batch_max=settings.sweep_batch_max,
        rounds_max=settings.sweep_rounds_max,
    )
    stop = asyncio.Event()
    try:
        await sweeper.run(stop)
    finally:
        await client.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
