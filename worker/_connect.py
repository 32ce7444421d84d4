"""Connect to Temporal the SDK's way: temporalio.envconfig (env, profiles, TLS, API key).

temporalio loads when a connection is made, not with this module: the command line reads
its errors and defaults without it (``fs-search --version`` never loads temporalio).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporalio.client import Client, Interceptor, Plugin
    from temporalio.converter import DataConverter
    from temporalio.envconfig import ClientConnectConfig
    from temporalio.runtime import Runtime

# Where every Temporal tool connects when nothing says otherwise.
DEFAULT_ADDRESS = "localhost:7233"
# How long a connection (and the namespace check after it) may take: a server that accepts
# but never answers would otherwise hold the command for as long as the SDK retries.
DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=10)
# HOST:PORT, the host a name, an IPv4 address or a bracketed IPv6 one.
_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})")
# The SDK's connection error is its Rust transport's debug text; the words a person reads,
# by what the OS or the resolver said (the `temporal` CLI's wording).
_REASONS = (
    ("ConnectionRefused", "connection refused"),
    ("dns error", "no such host"),
    ("failed to lookup address", "no such host"),
    ("HostUnreachable", "host unreachable"),
    ("NetworkUnreachable", "network unreachable"),
    ("TimedOut", "timed out"),
    ("ConnectionReset", "connection reset by the server"),
    ("InvalidCertificate", "the server's TLS certificate was refused"),
    ("InvalidContentType", "TLS handshake failed (is the server serving TLS?)"),
    ("CorruptMessage", "TLS handshake failed (is the server serving TLS?)"),
)


class TemporalUnreachable(RuntimeError):
    """Temporal could not be reached (the CLI exits 3)."""


class TemporalSettingsError(ValueError):
    """The Temporal connection settings (env, profile, TLS files) are unusable (exit 2)."""


def address_problem(address: str) -> str | None:
    """Why ``address`` is not a Temporal address ``HOST:PORT`` (None when it is one)."""
    form = _ADDRESS.fullmatch(address)
    if form is None:
        return "not HOST:PORT (e.g. localhost:7233)"
    if not 0 < int(form["port"]) < 65536:
        return f"port {form['port']} is not a TCP port"
    return None


def unreachable_reason(error: BaseException) -> str:
    """The SDK's connection error in a few words (``connection refused``), else its text."""
    text = str(error)
    for marker, words in _REASONS:
        if marker in text:
            return words
    said = re.findall(r'message: "([^"]+)"', text)
    return said[-1].lower() if said else text


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
    from temporalio.envconfig import ClientConfig

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
    timeout: timedelta = DEFAULT_CONNECT_TIMEOUT,
    data_converter: DataConverter | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """Connect using TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY / TLS / profiles.

    ``address`` and ``namespace`` override the environment and profile (see
    :func:`connection_settings`; with no address anywhere, ``localhost:7233``);
    ``runtime`` carries the metrics buffer when Temporal's metrics are exported;
    ``timeout`` bounds the connection and the namespace check together;
    ``data_converter`` and ``interceptors`` go to the client as given (a client without
    plugins: the CLI's one-off call).

    Raises:
        TemporalSettingsError: the settings cannot be loaded (e.g. a TLS file is missing),
            the address is not ``HOST:PORT``, or the namespace does not exist on the server.
        TemporalUnreachable: the server refused the connection or did not answer within
            ``timeout``; the message is one line (``failed connecting to Temporal server
            at HOST:PORT: connection refused``).
    """
    import asyncio

    from temporalio.client import Client

    config = connection_settings(address=address, namespace=namespace, profile=profile)
    config.setdefault("target_host", DEFAULT_ADDRESS)
    target = config["target_host"]
    problem = address_problem(target)
    if problem:
        # Checked here: the SDK would take "localhost" as port 80, say.
        raise TemporalSettingsError(f"Temporal address {target!r} is {problem}")
    failed = f"failed connecting to Temporal server at {target}"
    try:
        async with asyncio.timeout(timeout.total_seconds()):
            extra: dict[str, object] = {"interceptors": list(interceptors)}
            if data_converter is not None:
                extra["data_converter"] = data_converter
            client = await Client.connect(
                **config,
                plugins=list(plugins),
                runtime=runtime,
                **extra,  # type: ignore[arg-type]
            )
            await _check_namespace(client, target)
    except (TemporalSettingsError, TemporalUnreachable):
        raise  # the namespace check's own, already in words
    except TimeoutError as e:
        raise TemporalUnreachable(
            f"{failed}: no answer within {timeout.total_seconds():g} s (--connect-timeout)"
        ) from e
    except ValueError as e:  # the SDK's own check of the address's form
        raise TemporalSettingsError(f"Temporal address {target!r} is not HOST:PORT: {e}") from e
    except RuntimeError as e:
        raise TemporalUnreachable(f"{failed}: {unreachable_reason(e)}") from e
    return client


async def _check_namespace(client: Client, target: str) -> None:
    """A namespace the server does not have is a settings mistake, said once, here: a
    worker would otherwise poll it in vain (and the CLI fail with a traceback)."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError as e:
        if e.status == RPCStatusCode.UNAVAILABLE:
            raise TemporalUnreachable(
                f"failed connecting to Temporal server at {target}: {unreachable_reason(e)}"
            ) from e
        if e.status == RPCStatusCode.NOT_FOUND:
            raise TemporalSettingsError(
                f"Temporal namespace {client.namespace!r} does not exist on {target} "
                "(--namespace, TEMPORAL_NAMESPACE or the profile's namespace)"
            ) from e
        # Anything else (no permission to describe it, say) is for the calls to report.
