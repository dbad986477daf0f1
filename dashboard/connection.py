"""One dashboard connection: settings, the transport, the namespace, and credentials per interface.

The REST v2 and legacy v1 methods (`rest.py`) and the ability methods (`abilities.py`) are written against
this class; `DashboardClient` puts them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from dashboard.errors import ConfigurationError, DashboardError, InvalidResponse, TransportError
from dashboard.settings import DashboardSettings, Namespace
from dashboard.transport import Answer, Credentials, Transport, require

T = TypeVar("T")


class Connection:
    def __init__(self, settings: DashboardSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._transport = Transport(settings, transport=transport)
        self._namespace: Namespace | None = settings.namespace
        self._namespace_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.settings.base_url!r}, namespace={self._namespace!r})"

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ namespace

    async def namespace(self) -> Namespace:
        """`svc` or `mainwp`: from the settings, or discovered once from the REST index."""
        if self._namespace is None:
            async with self._namespace_lock:
                if self._namespace is None:
                    self._namespace = await self._discover_namespace()
        return self._namespace

    async def _discover_namespace(self) -> Namespace:
        try:
            answer = await self._transport.request(
                "GET", f"{self.settings.base_url}/", credentials=Credentials(), params={"_fields": "namespaces"}
            )
        except TransportError:
            raise  # not reached at all: the address may be right, the dashboard down (exit 4, not 2)
        except DashboardError as exc:
            raise ConfigurationError(
                f"could not read the REST index at {self.settings.base_url}/ to discover the namespace ({exc}); "
                "check FLEET_BASE_URL or set FLEET_NAMESPACE"
            ) from None
        namespaces = answer.body.get("namespaces") if isinstance(answer.body, dict) else None
        for candidate in ("mainwp", "svc"):
            if isinstance(namespaces, list) and f"{candidate}/v2" in namespaces:
                return candidate  # type: ignore[return-value]
        raise ConfigurationError(
            f"the REST index at {self.settings.base_url}/ lists no mainwp/v2 or svc/v2 namespace; "
            "is FLEET_BASE_URL the dashboard's /wp-json prefix? Or set FLEET_NAMESPACE"
        )

    # ------------------------------------------------------------ credentials

    def _rest_credentials(self) -> Credentials:
        key = require(self.settings.api_key, "the REST API key", "FLEET_API_KEY")
        return Credentials(headers={"Authorization": f"Bearer {key.get_secret_value()}"})

    def _ability_credentials(self) -> Credentials:
        if self.settings.abilities_user and self.settings.abilities_password:
            password = self.settings.abilities_password.get_secret_value()
            return Credentials(basic=(self.settings.abilities_user, password))
        if self.settings.abilities_bearer:
            return self._rest_credentials()
        raise ConfigurationError(
            "the Abilities API credentials are not configured: set FLEET_ABILITIES_USER and "
            "FLEET_ABILITIES_PASSWORD (a WordPress application password)"
        )

    def _v1_credentials(self) -> Credentials:
        key = require(self.settings.consumer_key, "the legacy v1 consumer key", "FLEET_CONSUMER_KEY")
        secret = require(self.settings.consumer_secret, "the legacy v1 consumer secret", "FLEET_CONSUMER_SECRET")
        return Credentials(
            params={"consumer_key": key.get_secret_value(), "consumer_secret": secret.get_secret_value()}
        )

    # ------------------------------------------------------------ raw calls

    async def _rest(
        self,
        method: str,
        route: str,
        *,
        idempotent: bool | None = None,
        params: dict[str, Any] | None = None,
        json: Any = None,
        form: dict[str, Any] | None = None,
        version: str = "v2",
    ) -> Answer:
        """Call `{base_url}/{namespace}/{version}{route}` with the credentials of that version."""
        namespace = await self.namespace()
        credentials = self._v1_credentials() if version == "v1" else self._rest_credentials()
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        return await self._transport.request(
            method,
            f"{self.settings.base_url}/{namespace}/{version}{route}",
            credentials=credentials,
            idempotent=idempotent,
            params=clean,
            json=json,
            form=form,
        )

    async def _abilities_get(self, route: str, params: dict[str, Any] | None = None) -> Answer:
        return await self._transport.request(
            "GET", f"{self.settings.resolved_abilities_url}{route}", credentials=self._ability_credentials(),
            params=params,
        )


def parse(answer: Answer, build: Callable[[Any], T]) -> T:
    """Build the typed result of an answer; a body of the wrong shape becomes `InvalidResponse` naming the call.

    Validation messages leave the offending values out: they may be secrets (a v1 key id is one).
    """
    try:
        return build(answer.body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in exc.errors()[:5]
        )
        message = f"unexpected answer ({problems})"
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        message = f"unexpected answer ({type(exc).__name__}: {str(exc)[:100]})"
    raise InvalidResponse(message, status=answer.status, method=answer.method, path=answer.path)
