"""The registry of APIs a node serves, and the context a handler receives.

Components (broker, controller, group coordinator, later the transaction
coordinator) register one handler per API key with the version range they
implement. ApiVersions is answered from this registry, so a node advertises
exactly what it implements.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol.build import make
from ..protocol.codec import EncodedResponse, response_class


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    connection_id: int
    frame: bytes | None = None
    """The request's frame, as received (its identity names this request)."""
    pipelined: Sequence[bytes] = ()
    """The frames the connection received after this one and has not started yet (they
    are answered after it, in order)."""

    @property
    def response_cls(self) -> type:
        """The kio response class of this request's API and version (looked up when
        needed: hot handlers answer with ``encoded`` and never need it)."""
        return response_class(self.api_key, self.api_version)

    def respond(self, data: dict[str, Any] | None = None, /, **fields: Any) -> Any:
        """Build this request's response (at the request's version) from plain values."""
        return make(self.response_cls, data, **fields)

    def encoded(self, body: bytes, error_codes: tuple[int, ...] = ()) -> EncodedResponse:
        """This request's response from a body a ``hot_codecs`` encoder wrote (at the
        request's version); ``error_codes``: the non-zero error codes in it."""
        return EncodedResponse(self.api_key, self.api_version, body, error_codes)


Handler = Callable[[RequestContext, Any], Awaitable[Any]]
"""An async callable returning the response entity, or None for "send no response"
(Produce with acks=0)."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    owner: str


class ApiRegistry:
    def __init__(self) -> None:
        self._specs: dict[int, ApiSpec] = {}

    def register(
        self, api_key: int, min_version: int, max_version: int, handler: Handler, owner: str
    ) -> None:
        if api_key in self._specs:
            raise ValueError(f"api key {api_key} is already served by {self._specs[api_key].owner}")
        for version in range(min_version, max_version + 1):
            response_class(api_key, version)  # fail at start-up, not at the first request
        self._specs[api_key] = ApiSpec(api_key, min_version, max_version, handler, owner)

    def wrap(self, api_key: int, wrapper: Callable[[Handler], Handler]) -> bool:
        """Replace a registered handler by ``wrapper(handler)`` (e.g. an authorization
        check in front of it); False when the API is not served here."""
        spec = self._specs.get(api_key)
        if spec is None:
            return False
        self._specs[api_key] = ApiSpec(
            api_key, spec.min_version, spec.max_version, wrapper(spec.handler), spec.owner
        )
        return True

    def get(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    def supports(self, api_key: int, api_version: int) -> bool:
        spec = self._specs.get(api_key)
        return spec is not None and spec.min_version <= api_version <= spec.max_version

    def specs(self) -> list[ApiSpec]:
        return [self._specs[k] for k in sorted(self._specs)]
