"""Connect to Temporal the SDK's way: temporalio.envconfig (env, profiles, TLS, API key)."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime


class TemporalUnreachable(RuntimeError):
    """Temporal could not be reached (the CLI exits 3)."""


class TemporalSettingsError(ValueError):
    """The Temporal connection settings (env, profile, TLS files) are unusable (exit 2)."""


async def connect(
    *,
    address: str | None = None,
    namespace: str | None = None,
    profile: str | None = None,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
) -> Client:
    """Connect using TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY / TLS / profiles.

    ``address`` and ``namespace`` override the environment and profile; ``runtime`` carries
    the metrics buffer when Temporal's metrics are exported.

    Raises:
        TemporalSettingsError: the settings cannot be loaded (e.g. a TLS file is missing).
        TemporalUnreachable: the server did not answer.
    """
    try:
        config = ClientConfig.load_client_connect_config(profile=profile)
    except Exception as e:  # noqa: BLE001 - unreadable TLS files, bad TOML, unknown profile
        raise TemporalSettingsError(f"Temporal connection settings are invalid: {e}") from e
    if config.get("api_key") == "":
        # An empty TEMPORAL_API_KEY (a templated env file) means "no key", not "key ''".
        config.pop("api_key")
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", "localhost:7233")
    try:
        return await Client.connect(**config, plugins=list(plugins), runtime=runtime)
    except RuntimeError as e:
        target = config.get("target_host")
        raise TemporalUnreachable(f"cannot reach Temporal at {target}: {e}") from e
