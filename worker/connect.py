"""Connect to Temporal the SDK's way: temporalio.envconfig (env, profiles, TLS, API key)."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

# Where every Temporal tool connects when nothing says otherwise.
DEFAULT_ADDRESS = "localhost:7233"


class TemporalUnreachable(RuntimeError):
    """Temporal could not be reached (the CLI exits 3)."""


class TemporalSettingsError(ValueError):
    """The Temporal connection settings (env, profile, TLS files) are unusable (exit 2)."""


def connection_settings(
    *, address: str | None = None, namespace: str | None = None, profile: str | None = None
) -> ClientConnectConfig:
    """The settings ``Client.connect`` gets, as every Temporal tool resolves them.

    ``address``/``namespace`` (the command line) first, then ``TEMPORAL_ADDRESS`` /
    ``TEMPORAL_NAMESPACE`` / ``TEMPORAL_API_KEY`` / TLS variables, then the envconfig
    profile (``profile``, else ``TEMPORAL_PROFILE``, else ``default``, from
    ``TEMPORAL_CONFIG_FILE`` or the user's config file). ``target_host`` is absent when
    none of them names a server.

    Raises:
        TemporalSettingsError: the settings cannot be loaded (a missing TLS file, bad TOML,
            an unknown profile).
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
    return config


async def connect(
    *,
    address: str | None = None,
    namespace: str | None = None,
    profile: str | None = None,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
) -> Client:
    """Connect using TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY / TLS / profiles.

    ``address`` and ``namespace`` override the environment and profile (see
    :func:`connection_settings`; with no address anywhere, ``localhost:7233``);
    ``runtime`` carries the metrics buffer when Temporal's metrics are exported.

    Raises:
        TemporalSettingsError: the settings cannot be loaded (e.g. a TLS file is missing),
            the address is not one, or the namespace does not exist on the server.
        TemporalUnreachable: the server did not answer.
    """
    config = connection_settings(address=address, namespace=namespace, profile=profile)
    config.setdefault("target_host", DEFAULT_ADDRESS)
    target = config["target_host"]
    try:
        client = await Client.connect(**config, plugins=list(plugins), runtime=runtime)
    except ValueError as e:  # the SDK's own check of the address's form
        raise TemporalSettingsError(f"Temporal address {target!r} is not HOST:PORT: {e}") from e
    except RuntimeError as e:
        raise TemporalUnreachable(f"cannot reach Temporal at {target}: {e}") from e
    await _check_namespace(client, target)
    return client


async def _check_namespace(client: Client, target: str) -> None:
    """A namespace the server does not have is a settings mistake, said once, here: a
    worker would otherwise poll it in vain (and the CLI fail with a traceback)."""
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise TemporalSettingsError(
                f"Temporal namespace {client.namespace!r} does not exist on {target} "
                "(--namespace, TEMPORAL_NAMESPACE or the profile's namespace)"
            ) from e
        # Anything else (no permission to describe it, say) is for the calls to report.
