"""The validated settings model and its FS_SEARCH_* names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fs_search.activities._config import ConfigError, FsSearchConfig, StorageSettings


def _env(values):
    return lambda name: values.get(name)


def test_sampling_choice_is_required_and_named():
    """Without an explicit sampling choice, loading fails naming the key."""
    with pytest.raises(ConfigError, match="FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS"):
        FsSearchConfig.load(getenv=_env({}))


def test_defaults_and_environment_names():
    """Defaults match the contract; FS_SEARCH_<NAME> sets each key."""
    cfg = FsSearchConfig.load(getenv=_env({"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "false"}))
    assert (cfg.glob_max_results, cfg.grep_max_matches, cfg.grep_max_line_bytes) == (100, 250, 2000)
    assert (cfg.raw_output_max_bytes, cfg.timeout_ms, cfg.spill_ttl_hours) == (
        20_000_000,
        30_000,
        72,
    )
    assert cfg.sample_over_cap_glob_results is False
    cfg = FsSearchConfig.load(
        getenv=_env(
            {"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true", "FS_SEARCH_GLOB_MAX_RESULTS": "7"}
        )
    )
    assert cfg.sample_over_cap_glob_results is True and cfg.glob_max_results == 7


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FS_SEARCH_GLOB_MAX_RESULTS", "-1"),
        ("FS_SEARCH_GREP_MAX_MATCHES", "0"),
        ("FS_SEARCH_TIMEOUT_MS", "0"),
        ("FS_SEARCH_RAW_OUTPUT_MAX_BYTES", "lots"),
        ("FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS", "maybe"),
        ("FS_SEARCH_RG_PATH", "bin/rg"),  # relative: would resolve in the workspace
        ("FS_SEARCH_SANDBOX", "sometimes"),
        ("FS_SEARCH_RG_MEMORY_MB", "16"),
    ],
)
def test_invalid_values_are_refused_naming_the_key(name, value):
    """Negative caps, a zero timeout, non-numbers are refused with the key's name."""
    env = {"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true", name: value}
    with pytest.raises(ConfigError, match=name):
        FsSearchConfig.load(getenv=_env(env))


def test_overrides_win_over_environment():
    """Explicit overrides (CLI flags) take precedence over the environment."""
    cfg = FsSearchConfig.load(
        getenv=_env({"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true"}),
        overrides={"sample_over_cap_glob_results": False},
    )
    assert cfg.sample_over_cap_glob_results is False


def test_config_is_frozen():
    """Settings cannot change after start-up."""
    cfg = FsSearchConfig.load(getenv=_env({}), overrides={"sample_over_cap_glob_results": True})
    with pytest.raises(ValidationError):
        cfg.glob_max_results = 5  # type: ignore[misc]


# Bad spill URLs a user writes, and what the one-line message must say about each.
BAD_SPILL_URLS = [
    ("s3:/bucket/x", "two slashes after 's3:'; did you mean 's3://bucket/x'?"),
    ("s3://", "no bucket: an S3 store is written s3://bucket/prefix"),
    ("s3:///x", "no bucket"),
    (
        "https://minio.local:9000/bucket",
        "https:// is not a spill store: expected file:///absolute/dir or s3://bucket/prefix",
    ),
    ("file://relative", "a file store is an absolute directory, written file:///absolute/dir"),
    ("file:relative", "file:///absolute/dir"),
    ("/tmp/spill", "not a URL: a directory is written file:///tmp/spill"),
    ("gs://b/x", "gs:// is not a spill store"),
]


@pytest.mark.parametrize(("url", "says"), BAD_SPILL_URLS)
def test_a_bad_spill_url_in_the_environment_is_one_line_naming_the_variable(url, says):
    """FS_SEARCH_SPILL_URL is checked at load: one line, the variable and value as the user
    wrote them, what is wrong and what a right one looks like."""
    env = {"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true", "FS_SEARCH_SPILL_URL": url}
    with pytest.raises(ConfigError) as info:
        FsSearchConfig.load(getenv=_env(env))
    message = str(info.value)
    assert message.startswith(f"invalid fs-search configuration: FS_SEARCH_SPILL_URL={url!r}: ")
    assert says in message and "\n" not in message
    assert "Value error" not in message  # pydantic's wording stays out


def test_an_https_spill_url_points_at_the_endpoint_variable():
    """An S3-compatible server's address given as the store: the message names where it goes."""
    env = {
        "FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true",
        "FS_SEARCH_SPILL_URL": "https://s3.local/b",
    }
    with pytest.raises(ConfigError, match="address goes in FS_SEARCH_S3_ENDPOINT_URL"):
        FsSearchConfig.load(getenv=_env(env))


def test_an_override_is_named_as_given_not_as_its_variable():
    """A value passed as an override (search_worker(**settings), CLI flags) is named by its
    setting; the environment variable, which the user never set, is not mentioned."""
    with pytest.raises(ConfigError) as info:
        FsSearchConfig.load(
            getenv=_env({}),
            overrides={
                "sample_over_cap_glob_results": True,
                "spill_url": "s3:/x",
                "glob_max_results": 0,
            },
        )
    message = str(info.value)
    assert "spill_url='s3:/x': an S3 store is written s3://bucket/prefix" in message
    assert "glob_max_results: Input should be greater than or equal to 1 (got 0)" in message
    assert "FS_SEARCH_SPILL_URL" not in message and "FS_SEARCH_GLOB_MAX_RESULTS" not in message


def test_a_bad_s3_endpoint_is_named():
    """FS_SEARCH_S3_ENDPOINT_URL must be an http(s) URL."""
    env = {
        "FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true",
        "FS_SEARCH_S3_ENDPOINT_URL": "localhost:8333",
    }
    with pytest.raises(
        ConfigError,
        match=r"FS_SEARCH_S3_ENDPOINT_URL='localhost:8333': an S3 endpoint is written http://host:port",
    ):
        FsSearchConfig.load(getenv=_env(env))


@pytest.mark.parametrize(
    "url", ["s3://bucket", "s3://bucket/a/b", "file:///tmp/x", "file://localhost/tmp/x"]
)
def test_good_spill_urls_load(url):
    """The forms the contract names pass the check."""
    env = {"FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS": "true", "FS_SEARCH_SPILL_URL": url}
    assert FsSearchConfig.load(getenv=_env(env)).spill_url == url


def test_storage_settings_are_the_stores_part_of_a_workers_settings():
    """StorageSettings reads only the stores' keys (a worker's other settings, even invalid
    ones, are not its business), validates them, and a worker's config is one."""
    env = {"FS_SEARCH_SPILL_URL": "s3://b/p", "FS_SEARCH_TIMEOUT_MS": "nonsense"}
    settings = StorageSettings.load(getenv=env.get)
    assert settings.spill_url == "s3://b/p" and settings.payload_threshold_bytes == 256 * 1024
    small = {"FS_SEARCH_PAYLOAD_THRESHOLD_BYTES": "12"}
    with pytest.raises(ConfigError, match=r"^FS_SEARCH_PAYLOAD_THRESHOLD_BYTES \("):
        StorageSettings.load(getenv=small.get)
    config = FsSearchConfig.load(
        getenv=lambda _: None, overrides={"sample_over_cap_glob_results": True}
    )
    assert isinstance(config, StorageSettings) and config.spill_ttl_hours == 72.0
