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
