import pytest

from engine.settings import MissingSetting, Settings


def test_missing_redis_url_names_the_variable() -> None:
    with pytest.raises(MissingSetting, match="ONSALE_REDIS_URL"):
        Settings.from_env({})


def test_defaults_and_overrides() -> None:
    s = Settings.from_env({"ONSALE_REDIS_URL": "redis://x:1/0", "ONSALE_SWEEP_BATCH_MAX": "50"})
    assert (s.redis_url, s.sweep_batch_max, s.sweep_interval_ms) == ("redis://x:1/0", 50, 200)


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


API_ENV = {
    "ONSALE_REDIS_URL": "redis://x",
    "ONSALE_TOKEN_SECRET": "t" * 32,
    "ONSALE_ADMIN_TOKEN": "a" * 32,
    "ONSALE_WEBHOOK_SECRET": "w" * 32,
    "ONSALE_PROVIDER_URL": "http://sim",
}


@pytest.mark.parametrize("missing", sorted(set(API_ENV) - {"ONSALE_REDIS_URL"}))
def test_the_api_refuses_to_boot_without_each_required_setting(missing: str) -> None:
    from api.settings import ApiSettings

    env = {k: v for k, v in API_ENV.items() if k != missing}
    with pytest.raises(MissingSetting, match=missing):
        ApiSettings.from_env(env)


def test_api_settings_defaults_and_overrides() -> None:
    from api.settings import ApiSettings

    s = ApiSettings.from_env({**API_ENV, "ONSALE_BODY_MAX_BYTES": "2048"})
    assert (s.body_max_bytes, s.webhook_tolerance_s, s.engine.redis_url) == (2048, 300, "redis://x")
    with pytest.raises(MissingSetting, match="ONSALE_TOKEN_TTL_S"):
        ApiSettings.from_env({**API_ENV, "ONSALE_TOKEN_TTL_S": "-1"})


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
