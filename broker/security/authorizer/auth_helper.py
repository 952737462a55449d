"""AuthHelper: the authorization checks request handlers make for the request being
handled (Kafka's AuthHelper), by the principal and host of its connection. Without an
authorizer (``authorizer.class.name`` empty) everything is allowed, as in Kafka; a
connection that proved ``cluster.secret`` is a broker, allowed everything (Kafka's
brokers are super users or hold ClusterAction)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from purgatory.broker.security.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from purgatory.broker.security.authorizer.standard_authorizer import StandardAuthorizer
from purgatory.broker.security.kafka_principal import KafkaPrincipal


class RequestContext(Protocol):
    """Who sent the request being handled (the SocketServer sets it per request)."""

    current_principal: KafkaPrincipal
    current_peer: str  # host:port
    current_broker: int | None  # the broker id of a connection that proved the secret


class AuthHelper:
    def __init__(
        self,
        context: Callable[[], RequestContext],
        authorizer: Callable[[], StandardAuthorizer | None],
    ) -> None:
        self._context = context  # the socket server (made after the handlers that ask)
        self._authorizer = authorizer

    @property
    def context(self) -> RequestContext:
        return self._context()

    @property
    def enabled(self) -> bool:
        return self._authorizer() is not None

    def _checker(self) -> StandardAuthorizer | None:
        """The authorizer to ask, or None when the answer is yes without asking."""
        authorizer = self._authorizer()
        if authorizer is None or self.context.current_broker is not None:
            return None
        return authorizer

    def _host(self) -> str:
        return self.context.current_peer.rsplit(":", 1)[0].strip("[]")

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        authorizer = self._checker()
        if authorizer is None:
            return True
        principal = self.context.current_principal
        return authorizer.authorize(principal, self._host(), operation, resource_type, name)

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names among ``names`` the principal may ``operation``."""
        authorizer = self._checker()
        if authorizer is None:
            return set(names)
        principal, host = self.context.current_principal, self._host()
        return {
            name
            for name in set(names)
            if authorizer.authorize(principal, host, operation, resource_type, name)
        }

    def authorize_by_resource_type(
        self, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        authorizer = self._checker()
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(
            self.context.current_principal, self._host(), operation, resource_type
        )
