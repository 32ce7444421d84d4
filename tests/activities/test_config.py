"""The validated settings model and its FS_SEARCH_* names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fs_search.activities.config import ConfigError, FsSearchConfig


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
