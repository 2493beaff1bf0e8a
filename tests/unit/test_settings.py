import pytest

from engine.config.settings import Settings
from engine.config.variables import MissingSetting
from tests.conftest import API_TEST_ENV


def test_missing_redis_url_names_the_variable() -> None:
    with pytest.raises(MissingSetting, match="ONSALE_REDIS_URL"):
        Settings.from_env({})


def test_defaults_and_overrides() -> None:
    s = Settings.from_env({"ONSALE_REDIS_URL": "redis://x:1/0", "ONSALE_SWEEP_BATCH_MAX": "50"})
    assert (s.redis_url, s.sweep_batch_max, s.sweep_interval_ms) == ("redis://x:1/0", 50, 200)


def test_the_hold_record_is_sparse_unless_full_is_asked_for() -> None:
    url = {"ONSALE_REDIS_URL": "redis://x"}
    assert Settings.from_env(url).hold_record == "sparse"
    assert Settings.from_env({**url, "ONSALE_HOLD_RECORD": "full"}).hold_record == "full"
    with pytest.raises(MissingSetting, match="ONSALE_HOLD_RECORD"):
        Settings.from_env({**url, "ONSALE_HOLD_RECORD": "json"})


@pytest.mark.parametrize("bad", ["abc", "0", "-5"])
def test_bad_numbers_are_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(MissingSetting, match="ONSALE_REDIS_TIMEOUT_MS"):
        Settings.from_env({"ONSALE_REDIS_URL": "redis://x", "ONSALE_REDIS_TIMEOUT_MS": bad})


def test_a_bad_keep_alive_is_a_clear_setting_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from onsale.cli import serve_options

    monkeypatch.setenv("ONSALE_HTTP_KEEPALIVE_S", "soon")
    with pytest.raises(MissingSetting, match="ONSALE_HTTP_KEEPALIVE_S"):
        serve_options()
    monkeypatch.setenv("ONSALE_HTTP_KEEPALIVE_S", "30")
    assert serve_options()["timeout_keep_alive"] == 30


def test_the_early_lane_is_on_by_default_and_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from api.claim_front.connection import LaneProtocol
    from api.transport import BoundedHttpToolsProtocol
    from onsale.cli import serve_options

    monkeypatch.delenv("ONSALE_EARLY_LANE", raising=False)
    assert serve_options()["http"].func is LaneProtocol
    monkeypatch.setenv("ONSALE_EARLY_LANE", "0")
    assert serve_options()["http"].func is BoundedHttpToolsProtocol
    monkeypatch.setenv("ONSALE_EARLY_LANE", "sometimes")
    with pytest.raises(MissingSetting, match="ONSALE_EARLY_LANE"):
        serve_options()


API_ENV = {
    "ONSALE_REDIS_URL": "redis://x",
    **API_TEST_ENV,
    "ONSALE_WEBHOOK_SECRET": "whs-Lr5tY8cV2nQ7mX1zK4bD9fH3jP6wS0a",
    "ONSALE_PROVIDER_URL": "http://sim",
}


REQUIRED = (
    "ONSALE_TOKEN_SECRET",
    "ONSALE_ADMIN_TOKEN",
    "ONSALE_WEBHOOK_SECRET",
    "ONSALE_PROVIDER_URL",
)


@pytest.mark.parametrize("missing", REQUIRED)
def test_the_api_refuses_to_boot_without_each_required_setting(missing: str) -> None:
    from api.settings import ApiSettings

    env = {k: v for k, v in API_ENV.items() if k != missing}
    with pytest.raises(MissingSetting, match=missing):
        ApiSettings.from_env(env)


def test_api_settings_defaults_and_overrides() -> None:
    from api.settings import ApiSettings

    s = ApiSettings.from_env({**API_ENV, "ONSALE_BODY_MAX_BYTES": "2048"})
    assert (s.body_max_bytes, s.webhook_tolerance_s, s.engine.redis_url) == (2048, 300, "redis://x")
    assert (s.limits.claims_per_s, s.limits.login_cap) == (2, 6)
    with pytest.raises(MissingSetting, match="ONSALE_TOKEN_TTL_S"):
        ApiSettings.from_env({**API_ENV, "ONSALE_TOKEN_TTL_S": "-1"})
    assert ApiSettings.from_env({**API_ENV, "ONSALE_CLAIMS_PER_S": "0"}).limits.claims_per_s == 0
    with pytest.raises(MissingSetting, match="ONSALE_LOGIN_CAP"):
        ApiSettings.from_env({**API_ENV, "ONSALE_LOGIN_CAP": "-1"})


JWT_ENV = {
    "ONSALE_JWT_JWKS_URL": "https://id.example/.well-known/jwks.json",
    "ONSALE_JWT_ISSUER": "https://id.example/",
    "ONSALE_JWT_AUDIENCE": "onsale",
}


def test_buyer_identity_is_the_identity_provider_unless_the_demo_login_is_asked_for() -> None:
    from api.settings import ApiSettings

    production = {k: v for k, v in API_ENV.items() if k != "ONSALE_DEMO_LOGIN"}
    with pytest.raises(MissingSetting, match="ONSALE_JWT_JWKS_URL"):
        ApiSettings.from_env(production)  # no identity at all: no boot
    s = ApiSettings.from_env({**production, **JWT_ENV})
    assert s.jwt is not None and not s.demo_login and s.jwt.algorithms == ("RS256", "ES256")
    for name in ("ONSALE_JWT_ISSUER", "ONSALE_JWT_AUDIENCE"):
        partial = {k: v for k, v in {**production, **JWT_ENV}.items() if k != name}
        with pytest.raises(MissingSetting, match=name):
            ApiSettings.from_env(partial)
    with pytest.raises(MissingSetting, match="not both"):
        ApiSettings.from_env({**API_ENV, **JWT_ENV})
    with pytest.raises(MissingSetting, match="ONSALE_JWT_ALGORITHMS"):
        ApiSettings.from_env({**production, **JWT_ENV, "ONSALE_JWT_ALGORITHMS": "HS256"})
    assert ApiSettings.from_env(API_ENV).demo_login


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("a", "1 characters"),
        ("admin-test-token", "16 characters"),
        ("t" * 32, "guessable"),
        ("abcdefgh" * 4, "repeated pattern"),
        ("0123456789abcdefghijklmnopqrstuv" * 2, "repeated pattern"),
    ],
)
@pytest.mark.parametrize(
    "name",
    [
        "ONSALE_ADMIN_TOKEN",
        "ONSALE_TOKEN_SECRET",
        "ONSALE_WEBHOOK_SECRET",
        "ONSALE_WEBHOOK_SECRET_PREVIOUS",
        "ONSALE_METRICS_TOKEN",
    ],
)
def test_weak_secrets_stop_boot_naming_the_variable(name: str, value: str, why: str) -> None:
    from api.settings import ApiSettings

    with pytest.raises(MissingSetting, match=f"{name} .*{why}"):
        ApiSettings.from_env({**API_ENV, name: value})


def test_generated_secrets_pass() -> None:
    import secrets

    from engine.config.variables import secret_weakness

    for _ in range(200):
        assert secret_weakness(secrets.token_urlsafe(32)) is None
        assert secret_weakness(secrets.token_hex(32)) is None
        assert secret_weakness(secrets.token_urlsafe(24)) is None


def test_a_previous_webhook_secret_is_accepted_during_a_rollover() -> None:
    from api.settings import ApiSettings
    from engine.model.signing import BadSignature, sign, verify

    old = "whs-old-Rb2Nc7Xm4Kv9Qz1Ht6Lp3Wd8Fj5G"
    s = ApiSettings.from_env({**API_ENV, "ONSALE_WEBHOOK_SECRET_PREVIOUS": old})
    assert s.webhook_secrets == (API_ENV["ONSALE_WEBHOOK_SECRET"], old)
    body = b'{"id": "evt_1"}'
    for secret in s.webhook_secrets:
        verify(s.webhook_secrets, body, sign(secret, body, 1000), 1000, 300)
    with pytest.raises(BadSignature):
        verify(
            s.webhook_secrets, body, sign("whs-unknown-Tq4Zp9Vn2Lm7Rx1Kc6", body, 1000), 1000, 300
        )
    assert ApiSettings.from_env(API_ENV).webhook_secrets == (API_ENV["ONSALE_WEBHOOK_SECRET"],)


def test_ledger_settings_need_a_dsn_and_read_their_numbers() -> None:
    from persistence.settings import LedgerSettings

    with pytest.raises(MissingSetting, match="ONSALE_PG_DSN"):
        LedgerSettings.from_env({"ONSALE_REDIS_URL": "redis://x"})
    s = LedgerSettings.from_env(
        {"ONSALE_REDIS_URL": "redis://x", "ONSALE_PG_DSN": "postgresql://h/d",
         "ONSALE_LEDGER_BATCH_MAX": "50"}
    )  # fmt: skip
    assert (s.pg_dsn, s.batch_max, s.claim_idle_ms) == ("postgresql://h/d", 50, 30_000)
    with pytest.raises(MissingSetting, match="ONSALE_LEDGER_IDLE_MS"):
        LedgerSettings.from_env({**API_ENV, "ONSALE_PG_DSN": "x", "ONSALE_LEDGER_IDLE_MS": "no"})


def test_the_ledger_metrics_export_throughput_refusals_and_lag_per_event() -> None:
    from prometheus_client import generate_latest

    from persistence.metrics import LedgerMetrics

    m = LedgerMetrics()
    m.entries.inc(3)
    m.lag_seconds.labels("e1").set(0.5)
    text = generate_latest(m.registry).decode()
    assert "onsale_ledger_entries_total 3.0" in text
    assert 'onsale_ledger_lag_seconds{event="e1"} 0.5' in text
    assert "onsale_ledger_alerts_total 0.0" in text


def test_a_cluster_is_chosen_by_the_url_and_nothing_else() -> None:
    from redis.asyncio.cluster import RedisCluster

    from engine.config.settings import cluster_url
    from engine.store.cluster import is_cluster

    assert cluster_url("redis://127.0.0.1:6379/0") is None
    assert cluster_url("redis://h:7000?cluster=false") is None
    assert cluster_url("redis+cluster://h:7000") == "redis://h:7000"
    assert cluster_url("redis://h:7000/0?cluster=true") == "redis://h:7000"
    assert cluster_url("rediss+cluster://u:p@h:7000?cluster=1&x=y") == "rediss://u:p@h:7000?x=y"
    with pytest.raises(MissingSetting, match="database 0 only"):
        cluster_url("redis://h:7000/3?cluster=true")
    one = Settings.from_env({"ONSALE_REDIS_URL": "redis://127.0.0.1:1/0"}).redis_client()
    many = Settings.from_env({"ONSALE_REDIS_URL": "redis+cluster://127.0.0.1:1"}).redis_client()
    assert not is_cluster(one) and isinstance(many, RedisCluster) and is_cluster(many)
    s = Settings.from_env({"ONSALE_REDIS_URL": "redis://x", "ONSALE_REDIS_WAIT_REPLICAS": "1"})
    assert (s.redis_wait_replicas, s.redis_wait_ms) == (1, 50)
    assert Settings.from_env({"ONSALE_REDIS_URL": "redis://x"}).replica_wait(one) is None
    off = {"ONSALE_REDIS_URL": "redis://x", "ONSALE_REDIS_WAIT_REPLICAS": "0"}
    assert Settings.from_env(off).replica_wait(one) is None
    with pytest.raises(MissingSetting, match="at least 0"):
        Settings.from_env({**off, "ONSALE_REDIS_WAIT_REPLICAS": "-1"})


def test_what_counts_as_an_outage_of_the_store() -> None:
    """A failover's errors are outages (503, retried), a bug of ours is not (500)."""
    from redis.exceptions import ClusterDownError, RedisClusterException, ResponseError
    from redis.exceptions import ConnectionError as RedisConnectionError

    from engine.store.cluster import is_outage

    def raised_in(filename: str, exc: BaseException) -> BaseException:
        code = compile("raise exc", filename, "exec")
        try:
            exec(code, {"exc": exc})
        except BaseException as got:
            return got
        raise AssertionError("not raised")

    assert is_outage(RedisConnectionError("reset")) and is_outage(TimeoutError())
    assert is_outage(ClusterDownError("CLUSTERDOWN The cluster is down"))
    assert is_outage(RedisClusterException("Redis Cluster cannot be connected"))
    assert not is_outage(ResponseError("ERR wrong number of arguments"))
    torn = AttributeError("'NoneType' object has no attribute 'writelines'")
    assert is_outage(raised_in("/venv/lib/redis/asyncio/connection.py", torn))
    closed = RuntimeError("unable to perform operation on <TCPTransport closed=True>")
    assert is_outage(raised_in("/venv/lib/uvloop/transports.py", closed))
    assert not is_outage(raised_in("/work/engine/holds.py", AttributeError("ours")))
    assert not is_outage(AttributeError("no traceback"))


def test_a_boot_names_every_missing_or_weak_setting_at_once() -> None:
    import os
    import subprocess
    import sys

    from api.settings import ApiSettings
    from engine.config.variables import every_problem

    # No ONSALE_REDIS_URL, a number that is not one, a guessable admin token.
    env = {**API_TEST_ENV, "ONSALE_SWEEP_INTERVAL_MS": "soon", "ONSALE_ADMIN_TOKEN": "aaaaaaaa",
           "ONSALE_WEBHOOK_SECRET": "whk-R7pL2xQ9vN4mB8cT1yK6sJ3fH5gD0wE",
           "ONSALE_PROVIDER_URL": "http://127.0.0.1:1"}  # fmt: skip
    with pytest.raises(MissingSetting) as caught, every_problem():
        ApiSettings.from_env(env)
    lines = str(caught.value).splitlines()
    assert [line.split()[0] for line in lines] == [
        "ONSALE_REDIS_URL", "ONSALE_SWEEP_INTERVAL_MS", "ONSALE_ADMIN_TOKEN",
    ]  # fmt: skip
    with pytest.raises(MissingSetting, match="ONSALE_REDIS_URL"):  # outside: the first, at once
        ApiSettings.from_env(env)
    # And from the command line: exit 2, one line each.
    done = subprocess.run(
        [sys.executable, "-m", "onsale.cli", "serve"],
        env={"PATH": os.environ.get("PATH", ""), **env}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done
    said = [line for line in done.stderr.splitlines() if line.startswith("onsale: ")]
    assert len(said) == 3 and "ONSALE_ADMIN_TOKEN" in said[2], done.stderr


@pytest.mark.slow  # a process per command family (about a second each)
@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["worker"], {}, "ONSALE_REDIS_URL"),
        (["sweep"], {"ONSALE_REDIS_URL": "redis://127.0.0.1:1/0", "ONSALE_SWEEP_BATCH_MAX": "x"},
         "ONSALE_SWEEP_BATCH_MAX"),
        (["stock", "show", "--event", "e1"], {}, "ONSALE_REDIS_URL"),
        (["policy", "report", "e1"], {"ONSALE_REDIS_URL": "redis://127.0.0.1:1/0"},
         "ONSALE_PG_DSN"),
        (["ledger"], {"ONSALE_PG_DSN": "postgresql://u@127.0.0.1:1/x"}, "ONSALE_REDIS_URL"),
        (["migrate"], {}, "ONSALE_PG_DSN"),
        (["reconcile"], {"ONSALE_REDIS_URL": "redis://127.0.0.1:1/0",
                         "ONSALE_PG_DSN": "postgresql://u@127.0.0.1:1/x",
                         "ONSALE_PROVIDER": "stripe"}, "ONSALE_STRIPE_API_KEY"),
        (["serve"], {}, "ONSALE_REDIS_URL"),
    ],
)  # fmt: skip
def test_every_command_refused_a_setting_exits_2_naming_it(
    argv: list[str], env: dict[str, str]
    , named: str
) -> None:  # fmt: skip
    """Whichever command reads a setting, and wherever (its settings, its provider's), a
    missing or malformed one ends it with 2 and the variable named, before any connection. A
    process of its own each: a command sets up the process it runs in (its logging, serve's
    metrics directory)."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "onsale.cli", *argv],
        env={"PATH": os.environ.get("PATH", ""), **env}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done
    said = done.stderr.splitlines()
    assert said and all(line.startswith("onsale: ") for line in said), done.stderr
    assert named in said[0], said


def test_serve_leaves_no_metrics_directory_named_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """`onsale serve` names a private metrics directory in PROMETHEUS_MULTIPROC_DIR and wipes it
    at the end; the variable goes with it, or a process started afterwards by the same caller
    would write its series to a directory that no longer exists."""
    import argparse
    import os

    from onsale.serve import serve

    for name in [n for n in os.environ if n.startswith("ONSALE_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with pytest.raises(MissingSetting):
        serve(argparse.Namespace())
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/somewhere/else")
    with pytest.raises(MissingSetting):
        serve(argparse.Namespace())
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == "/somewhere/else"
