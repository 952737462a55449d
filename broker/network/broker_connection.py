"""BrokerConnection: one client connection of the SocketServer, an asyncio Protocol.

A connection's first request says which protocol it speaks (``request_channel.
speaks_kafka``; Kafka's code may still be loading, ``served_protocol.LazyProtocol``), and
from then on its frames go through that protocol's codec and API handlers. An
incremental frame decoder; requests dispatched in arrival order; responses written in
that same order even when an earlier one is still pending (Kafka's rule, kept by
protocol.in_flight as on the client's end), those produced while handling one read
written together (up to 32 at a time, so that a pipelining client is never idle while the
broker works through its read), as are those completed by one pass of the event loop.
Back-pressure: when the socket's send buffer is full the remaining frames of a read wait
in a backlog and the connection stops being read until it drains; so does a connection
with ``queued.max.requests`` responses outstanding.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import inspect
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from purgatory.broker.api.results import CloseConnection, Deferred
from purgatory.broker.network.request_channel import (
    PURGATORY,
    Codec,
    Request,
    RequestHeader,
    UnreadableRequest,
    speaks_kafka,
)
from purgatory.broker.network.served_protocol import Handler, ServedProtocol
from purgatory.broker.ops.faults import LOST, peer_broker
from purgatory.broker.security.kafka_principal import ANONYMOUS, KafkaPrincipal, user
from purgatory.broker.security.sasl import SaslAuthenticationError
from purgatory.broker.security.sasl_server_authenticator import (
    SaslServerAuthenticator,
    SaslState,
    SaslStateError,
)
from purgatory.broker.security.ssl_principal_mapper import distinguished_name
from purgatory.clients.cluster_auth import MECHANISM, AuthenticationFailed, ServerExchange
from purgatory.common.delayed_receiver import DelayedReceiver
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import INTER_BROKER_APIS, ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.framing import FrameDecoder, FrameError, FrameTooLarge
from purgatory.protocol.in_flight import InFlight, InFlightRequests

if TYPE_CHECKING:
    from purgatory.broker.config.listeners import Listener
    from purgatory.broker.network.socket_server import SocketServer
    from purgatory.broker.ops.metrics import RequestTimes

_perf = time.perf_counter
_FLUSH_BYTES = 256 * 1024  # hand responses to the transport once this many are waiting
# ... and after every this many requests of one read. A pipelining client (64 requests in
# flight, say, sent in one write) then has answers to act on, and sends its next requests,
# while the broker handles the rest of the read; answering the whole read in one write made
# the two take turns, each idle while the other worked (a broker serving single-record
# produces was busy 75% of the time). One system call per 32 answers costs little.
_FLUSH_EVERY = 32
_SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_FETCH = int(ApiKey.FETCH)
_API_VERSIONS = int(ApiKey.API_VERSIONS)


class _Waiting(msgspec.Struct, gc=False):
    """What a request waiting in a purgatory keeps for its answer and its timing: when it
    arrived and when its local handling ended (the wait, Kafka's remote time, starts
    there). Out of the cycle collector's sight (nothing it holds refers back to it), as
    are the request and the operation's parameters: thousands of fetches parking at once
    would otherwise each add to the collections that stop the broker meanwhile."""

    request: Request
    times: RequestTimes
    start: float
    local_end: float
    to_response: Callable[[Any], Any] | None = None  # a Deferred's: the body from the result


def _callback_after_close(future: asyncio.Future[Any]) -> None:
    """A closed connection's ``on_done``: nothing waits for an answer any more."""


class BrokerConnection(asyncio.Protocol):
    def __init__(self, server: SocketServer, listener: Listener, ip: str) -> None:
        self.server = server
        self.listener = listener
        # What its role refuses (broker/config/listeners.py): a client listener serves no
        # broker, a controller listener only brokers.
        self.clients_only = not listener.serves_brokers
        self.brokers_only = not listener.serves_clients
        # The ``listener`` label of request metrics: ours is PURGATORY; Kafka's protocol
        # is labelled with the listener's name, as Kafka does.
        self.metrics_listener = PURGATORY
        # Chosen by the first request (``_speak``): our protocol until then.
        self.handlers: Mapping[int, Handler] = server.msgpack.handlers
        self.codec: Codec = server.msgpack.codec
        self.chosen = False
        self.awaiting_protocol = False  # Kafka's protocol is loading for this connection
        self.client_software: tuple[str, str] | None = None  # KIP-511, Kafka clients
        self.metrics = server.metrics
        self.decoder = FrameDecoder(server.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Requests answered in order behind one still waiting (only those: with nothing
        # waiting, an answer goes straight to the output buffer).
        self.in_flight: InFlightRequests[_Waiting | None] = InFlightRequests()
        self.out = bytearray()
        self.flush_scheduled = False  # answers completed this loop pass go out together
        self.closing = False
        self.reading_paused = False
        self.writing_paused = False
        # Not read until then, a client over its quota (KIP-219; ``throttle``).
        self.throttled = False
        self._end_throttling: asyncio.TimerHandle | None = None
        self.pending: dict[asyncio.Future[Any], InFlight[_Waiting | None]] = {}
        self.backlog: deque[bytes] = deque()  # frames read but not handled (writing paused)
        self.ip = ip  # as the acceptor counted it (released when the connection is lost)
        # Idle expiry: a read sets ``active``; the server's sweep clears it and keeps
        # ``idle_since`` (no clock read on the request path).
        self.active = False
        self.idle_since = time.monotonic()
        self.client_id: str | None = None  # from the first request
        self.peer_broker_id: int | None = None  # the broker behind an inter-broker client id
        # Set once the peer proved it holds cluster.secret (SaslAuthenticate): only then are
        # inter-broker and controller APIs served to it.
        self.authenticated_broker: int | None = None
        self.authentication: ServerExchange | None = None
        self.exempt_broker: int | None = None  # the broker id it left max.connections' count as
        # Whom it acts as (ACLs, quotas): its SASL identity on a SASL listener, its client
        # certificate's on an SSL one, else User:ANONYMOUS.
        self.principal: KafkaPrincipal = ANONYMOUS
        security = server.security.get(listener.name)
        self.principal_mapper = None if security is None else security.principal_mapper
        # Brokers log in here with SASL as this user (sasl.mechanism.inter.broker.protocol).
        login = None if security is None else security.broker_login
        self.broker_principal = None if login is None else user(login.username)
        self.sasl: SaslServerAuthenticator | None = None
        if security is not None and security.sasl is not None:
            self.sasl = SaslServerAuthenticator(security.sasl)
            # Until it authenticates, a client's requests are held to a smaller size.
            self.decoder.max_frame_bytes = min(
                server.max_request_bytes, security.sasl.max_receive_size
            )
        self.receiver = DelayedReceiver(self._receive)  # holds bytes under a latency fault
        self.lossy = False  # a drop fault lost bytes of it: closed when the fault ends
        # Made once, not per waiting request: each would otherwise be one more object for
        # the cycle collector to count while requests wait in a purgatory.
        self.on_done = self._complete
        self.context = contextvars.copy_context()

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        self.metrics.connections += 1
        self.metrics.connections_created += 1
        if self.principal_mapper is not None:
            self._certificate_principal(transport)
        if self.server.faults.active:
            self.fault_check()

    def _certificate_principal(self, transport: asyncio.BaseTransport) -> None:
        """The principal of an SSL client's certificate (none: User:ANONYMOUS), through
        ssl.principal.mapping.rules; a name no rule maps closes the connection, as Kafka
        fails its authentication."""
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if not certificate or self.principal_mapper is None:
            return
        try:
            self.principal = user(self.principal_mapper.name(distinguished_name(certificate)))
        except ValueError as exc:
            self._bad_input("ssl_principal_unmapped", str(exc))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.quotas.release(self.ip, exempt_broker=self.exempt_broker)
        self.server.connections.discard(self)
        if self.client_software is not None:
            self.server.clients[self.client_software] -= 1
        self.metrics.connections -= 1
        self.metrics.connections_closed += 1
        abandon = self.server.abandon
        for task in list(self.pending):
            task.cancel()  # its callback, on_done, runs and lets go of it
            abandon(task)  # and the purgatory lets go of the operation behind it
        # Let go of the two methods of its own it keeps (the receiver's, its waiting
        # requests' callback): with them, it and its buffers would wait to be freed for the
        # cycle collector, which hardly runs under steady load (see gc_policy).
        self.receiver.close()
        self.on_done = _callback_after_close
        if self._end_throttling is not None:
            self._end_throttling.cancel()
        if self.server.current_connection is self:  # (it would keep it alive)
            self.server.current_connection = None

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._handle_backlog()

    def _handle_backlog(self) -> None:
        """Handle the frames that waited (for the socket to drain, or for Kafka's code)."""
        if self.backlog:
            frames = list(self.backlog)
            self.backlog.clear()
            self._handle_frames(frames)
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        faults = self.server.faults
        if faults.active:
            delay = faults.receive_delay(self.peer_broker_id, self.client_id)
            if delay == LOST:  # a drop fault: these bytes never arrived
                self.lossy = True
                return
            self.receiver.receive(data, delay)
        elif self.receiver.held:
            self.receiver.receive(data, 0.0)
        else:
            self._receive(data)

    def _receive(self, data: bytes) -> None:
        if self.closing:
            return
        self.active = True
        self.metrics.network_in += len(data)
        try:
            frames = self.decoder.feed(data)
        except FrameTooLarge as exc:
            self._bad_input("frame_too_large", str(exc))
            return
        except FrameError as exc:  # pragma: no cover - FrameTooLarge is the only kind today
            self._bad_input("bad_frame", str(exc))
            return
        if self.backlog:
            self.backlog.extend(frames)
        else:
            self._handle_frames(frames)
        self._update_reading()

    def _handle_frames(self, frames: list[bytes]) -> None:
        for i, frame in enumerate(frames):
            if (
                self.writing_paused
                or self.throttled
                or (not self.chosen and not self._speak(frame))
            ):
                self.backlog.extend(frames[i:])
                break
            self._handle(frame)
            if self.closing:
                return
            if i % _FLUSH_EVERY == _FLUSH_EVERY - 1 or len(self.out) >= _FLUSH_BYTES:
                self._flush()  # may pause writing, which stops the loop above
        self._flush()

    # -- requests -------------------------------------------------------------------------

    def _speak(self, frame: bytes) -> bool:
        """Choose the protocol by the first request. False while Kafka's is still loading:
        the frames wait in the backlog (reading paused) until ``_kafka_loaded``."""
        kafka = self.server.kafka
        if kafka is not None and speaks_kafka(frame):
            if kafka.served is None:
                if not self.awaiting_protocol:
                    self.awaiting_protocol = True
                    kafka.load().add_done_callback(self._kafka_loaded)
                return False
            self.codec, self.handlers = kafka.served
            self.metrics_listener = self.listener.name
        self.chosen = True
        return True

    def _kafka_loaded(self, loading: asyncio.Future[ServedProtocol]) -> None:
        self.awaiting_protocol = False
        if self.closing:
            return
        if (exc := loading.exception()) is not None:
            self.server.log.error("kafka_protocol_unavailable", peer=self.peer, error=str(exc))
            self._close()
            return
        self.codec, self.handlers = loading.result()
        self.metrics_listener = self.listener.name
        self.chosen = True
        self._handle_backlog()

    def _handle(self, frame: bytes) -> None:
        start = _perf()
        try:
            request = self.codec.decode(frame, start)
        except UnreadableRequest as exc:
            self._bad_input(exc.reason, str(exc))
            return
        except RequestError as exc:
            assert exc.header is not None
            h = exc.header
            self.metrics.for_request(
                h.api_key, h.api_version, listener=self.metrics_listener
            ).count += 1
            self._refuse(h, exc, start)
            return
        if self.client_id is None:
            self.client_id = request.client_id
            self.peer_broker_id = peer_broker(request.client_id)
        if request.client_software is not None:
            self._client_software(request.client_software)
        api_key = request.api_key
        if self.server.faults.active and self._inject(request):
            return
        if self.sasl is not None and self._sasl_gate(request, start):
            return
        if api_key == _SASL_AUTHENTICATE and self.metrics_listener == PURGATORY:
            self._authenticate(request, start)
            return
        if (api_key in INTER_BROKER_APIS or request.from_follower) and (
            self.authenticated_broker is None or self.clients_only
        ):
            self._refuse(request, self._broker_api_refused(api_key), start)
            return
        if self.brokers_only and self.authenticated_broker is None and api_key != _API_VERSIONS:
            self._not_a_broker(request, start)
            return
        stats = self.metrics.for_request(
            api_key, request.api_version, request.from_follower, self.metrics_listener
        )
        stats.count += 1
        times = stats.times
        server = self.server
        server.current_client = request.client_id
        server.current_peer = self.peer
        server.current_listener = self.listener.name
        server.current_principal = self.principal
        server.current_broker = self.authenticated_broker
        server.current_connection = self
        server.current_request_bytes = len(frame)
        try:
            result = self.handlers[api_key](request.body, request.api_version)
        except RequestError as exc:
            self._refuse(request, exc, start)
            return
        except CloseConnection as exc:
            self.server.log.info("closing_connection", peer=self.peer, reason=str(exc))
            self._close()
            return
        except Exception as exc:  # a bug in a handler must not take the broker down
            self.server.log.exception("request_failed", peer=self.peer, api_key=api_key)
            self.metrics.record_error("Unknown", ErrorCode.UNKNOWN_SERVER_ERROR)
            self._respond_error(
                request,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"unexpected server error: {type(exc).__name__}",
            )
            return
        if server.request_quotas is not None and self.authenticated_broker is None:
            result = self._request_quota(request, result, start)
        if result is None:
            times.observe_immediate(_perf() - start)
            return
        if isinstance(result, msgspec.Struct) or not (
            isinstance(result, Deferred) or inspect.isawaitable(result)
        ):  # answered now: straight to the output unless a request before it waits
            self._respond(request, result)
            times.observe_immediate(_perf() - start)
            return
        # Waiting (later answers queue behind it): in a purgatory, or on another task.
        self.codec.trim_waiting(request)
        if isinstance(result, Deferred):
            future: asyncio.Future[Any] = result.future
            waiting = _Waiting(request, times, start, _perf(), result.to_response)
        else:
            future = asyncio.ensure_future(result)
            waiting = _Waiting(request, times, start, _perf())
        self.pending[future] = self.in_flight.add(request.correlation_id, waiting)
        future.add_done_callback(self.on_done, context=self.context)

    def _request_quota(self, request: Request, result: Any, start: float) -> Any:
        """Count the time the request took against its client's request_percentage; an
        answer made at once carries the throttle time if it has the field (a Kafka
        response) and a longer one is not there already."""
        quotas = self.server.request_quotas
        throttle_ms = quotas.request_throttle_ms(self, request.client_id or "", _perf() - start)
        if throttle_ms and dataclasses.is_dataclass(result) and hasattr(result, "throttle_time"):
            throttle = datetime.timedelta(milliseconds=throttle_ms)
            if result.throttle_time < throttle:
                result = dataclasses.replace(result, throttle_time=throttle)  # type: ignore[type-var]
        return result

    # -- SASL (a SASL_PLAINTEXT or SASL_SSL listener) ------------------------------------

    def _sasl_gate(self, request: Request, start: float) -> bool:
        """Handle what SASL decides for a request on a SASL listener; True if it did
        (answered it, refused it or closed the connection)."""
        sasl = self.sasl
        assert sasl is not None
        api_key = request.api_key
        if self.metrics_listener == PURGATORY:
            if api_key == _SASL_AUTHENTICATE and request.body.mechanism != MECHANISM:
                self._sasl_ours(request, start)
                return True
            if sasl.authenticated or self.authenticated_broker is not None:
                return False
            if api_key == _SASL_AUTHENTICATE:
                return False  # a broker proving cluster.secret
            mechanisms = ", ".join(sasl.listener.mechanisms)
            message = (
                f"listener {self.listener.name} is {self.listener.security_protocol}: "
                f"authenticate first (SaslAuthenticate with one of {mechanisms})"
            )
            self._refuse(request, RequestError(ErrorCode.ILLEGAL_SASL_STATE, message), start)
            return True
        if api_key in (_SASL_HANDSHAKE, _SASL_AUTHENTICATE):
            if sasl.state is not SaslState.COMPLETE or (
                api_key == _SASL_HANDSHAKE and sasl.reauthenticates()
            ):
                self._sasl_kafka(request, start)
                return True
            return False  # KafkaApis answers it: ILLEGAL_SASL_STATE, as Kafka's
        if not sasl.authenticated or sasl.state is not SaslState.COMPLETE:
            if api_key == _API_VERSIONS and sasl.state is SaslState.HANDSHAKE:
                return False
            reason = (
                f"{ApiKey(api_key).api_name} before SASL authentication on listener "
                f"{self.listener.name}"
                if not sasl.authenticated
                else f"{ApiKey(api_key).api_name} during a SASL re-authentication"
            )
            if sasl.state in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE):
                # Mid-exchange, Kafka answers the request ILLEGAL_SASL_STATE, then closes.
                self.metrics.record_bad_request("illegal_sasl_state")
                self.server.log_bad_input(self.peer, "illegal_sasl_state", reason)
                self._respond_error(request, ErrorCode.ILLEGAL_SASL_STATE, reason)
                self._close()
            else:
                self._bad_input("illegal_sasl_state", reason)
            return True
        if sasl.expired(start):
            self.server.log.info(
                "sasl_session_expired", peer=self.peer, principal=str(self.principal)
            )
            self._close()
            return True
        return False

    def _sasl_kafka(self, request: Request, start: float) -> None:
        """SaslHandshake and SaslAuthenticate of a Kafka client."""
        sasl = self.sasl
        assert sasl is not None
        # Kafka's code, loaded with the first Kafka connection (not at start).
        from purgatory.broker.api.kafka.sasl import authenticate_response, handshake_response

        key, version = request.api_key, request.api_version
        self.metrics.for_request(key, version, listener=self.metrics_listener).count += 1
        try:
            if key == _SASL_HANDSHAKE:
                code, mechanisms = sasl.handshake(request.body.mechanism)
                self._respond(request, handshake_response(version, code, tuple(mechanisms)))
                if code != ErrorCode.NONE:
                    self._close()  # as Kafka: the client learnt the mechanisms it may use
            else:
                outcome = sasl.authenticate(request.body.auth_bytes)
                answer = authenticate_response(
                    version,
                    ErrorCode.NONE,
                    challenge=outcome.challenge,
                    session_lifetime_ms=outcome.session_lifetime_ms,
                )
                self._respond(request, answer)
                if outcome.complete:
                    self._sasl_authenticated()
        except SaslStateError as exc:
            self._bad_input("illegal_sasl_state", str(exc))
            return
        except SaslAuthenticationError as exc:
            answer = authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
            self._fail_authentication(request, answer, str(exc))
            return
        except Exception:  # a bug in a mechanism must not take the broker down
            self.server.log.exception("sasl_failed", peer=self.peer, api_key=request.api_key)
            self._close()
            return
        stats = self.metrics.for_request(key, version, listener=self.metrics_listener)
        stats.times.observe_immediate(_perf() - start)

    def _sasl_ours(self, request: Request, start: float) -> None:
        """SaslAuthenticate of our protocol with a SASL mechanism: its first message
        picks the mechanism (Kafka's SaslHandshake travels with it)."""
        sasl = self.sasl
        assert sasl is not None
        body = request.body
        try:
            if sasl.state is SaslState.HANDSHAKE or sasl.state is SaslState.COMPLETE:
                code, mechanisms = sasl.handshake(body.mechanism)
                if code != ErrorCode.NONE:
                    message = (
                        f"SASL mechanism {body.mechanism} is not enabled on listener "
                        f"{self.listener.name}: one of {', '.join(mechanisms)}"
                    )
                    self._respond(request, ib.SaslAuthenticateResponse(code, message))
                    self._close()
                    return
            elif body.mechanism != sasl.mechanism:
                raise SaslStateError(
                    f"SaslAuthenticate with {body.mechanism} in a {sasl.mechanism} exchange"
                )
            outcome = sasl.authenticate(body.auth_bytes)
        except SaslStateError as exc:
            self._bad_input("illegal_sasl_state", str(exc))
            return
        except SaslAuthenticationError as exc:
            code = ErrorCode.SASL_AUTHENTICATION_FAILED
            self._fail_authentication(
                request, ib.SaslAuthenticateResponse(code, str(exc)), str(exc)
            )
            return
        except Exception:  # a bug in a mechanism must not take the broker down
            self.server.log.exception("sasl_failed", peer=self.peer, api_key=request.api_key)
            self._close()
            return
        self._respond(request, ib.SaslAuthenticateResponse(ErrorCode.NONE, None, outcome.challenge))
        if outcome.complete:
            self._sasl_authenticated()
        stats = self.metrics.for_request(request.api_key, request.api_version)
        stats.times.observe_immediate(_perf() - start)

    def _proven_broker(self, broker_id: int) -> None:
        self.authenticated_broker = broker_id
        # Kafka exempts its inter-broker listener from max.connections; one port serves
        # both here, so a proven broker's connections leave the count.
        if self.server.quotas.exempt(self.ip, broker_id):
            self.exempt_broker = broker_id

    def _sasl_authenticated(self) -> None:
        sasl = self.sasl
        assert sasl is not None and sasl.principal is not None and sasl.mechanism is not None
        self.principal = sasl.principal
        self.decoder.max_frame_bytes = self.server.max_request_bytes
        if (
            self.broker_principal is not None
            and sasl.principal == self.broker_principal
            and self.authenticated_broker is None
        ):
            # A broker: logged in as the brokers' user, under its inter-broker client id.
            broker_id = peer_broker(self.client_id)
            if broker_id is not None and broker_id in self.server.quotas.brokers:
                self._proven_broker(broker_id)
        self.server.count_authentication(
            self.listener.name, sasl.mechanism, "success", sasl.reauthenticating
        )

    def _fail_authentication(self, request: Request, answer: Any, reason: str) -> None:
        """Answer a failed authentication after connection.failed.authentication.delay.ms
        and close the connection, as Kafka does; nothing it sends meanwhile is read."""
        sasl = self.sasl
        assert sasl is not None
        self.server.count_authentication(
            self.listener.name, sasl.mechanism or "", "failure", sasl.reauthenticating
        )
        self.metrics.record_bad_request("authentication_failed")
        self.server.log_bad_input(self.peer, "authentication_failed", reason)
        out = bytearray()
        self._encode_into(out, request, answer)
        self._flush()
        self.closing = True  # nothing more is handled
        delay = sasl.listener.failed_delay_ms / 1000
        if self.transport is not None:
            self.transport.pause_reading()
            asyncio.get_running_loop().call_later(delay, self._answer_and_close, bytes(out))

    def _answer_and_close(self, answer: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self.metrics.network_out += len(answer)
            transport.write(answer)
            transport.close()

    def _not_a_broker(self, request: Request, start: float) -> None:
        """A request on a controller listener from someone not proven a broker: our
        protocol's clients are told why; a Kafka client is closed on, as Kafka closes a
        connection asking an API its listener does not serve (an empty answer would tell
        it the cluster has no brokers)."""
        message = (
            f"listener {self.listener.name} is a controller listener "
            "(controller.listener.names): it serves brokers proving cluster.secret only; "
            "clients connect to another listener"
        )
        if self.metrics_listener != PURGATORY:
            self._bad_input("controller_listener", message)
            return
        error = RequestError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message)
        self._refuse(request, error, start)

    def _broker_api_refused(self, api_key: int) -> RequestError:
        name = "a follower Fetch" if api_key == _FETCH else ApiKey(api_key).api_name
        if self.clients_only:
            return RequestError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"{name} is served on the inter-broker listener only, and {self.listener.name} "
                "is a client listener (inter.broker.listener.name, controller.listener.names)",
            )
        how = (
            f"log in as {self.broker_principal} first (the brokers' user)"
            if self.broker_principal is not None
            else "authenticate with the cluster secret first (cluster.secret)"
        )
        return RequestError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{name} is served to brokers only: {how}"
        )

    def _authenticate(self, request: Request, start: float) -> None:
        """One step of a broker's SaslAuthenticate exchange (clients/cluster_auth.py). A
        failure is answered SASL_AUTHENTICATION_FAILED and closes the connection."""
        body = request.body
        exchange = self.authentication
        if exchange is None:
            exchange = self.authentication = ServerExchange(self.server.cluster_secret)
        try:
            if body.mechanism != MECHANISM:
                raise AuthenticationFailed(f"unsupported mechanism {body.mechanism!r}")
            answer = exchange.step(body.auth_bytes)
        except AuthenticationFailed as exc:
            self.metrics.record_bad_request("authentication_failed")
            self.server.log_bad_input(self.peer, "authentication_failed", str(exc))
            self._respond(
                request,
                ib.SaslAuthenticateResponse(
                    ErrorCode.SASL_AUTHENTICATION_FAILED, "authentication failed"
                ),
            )
            self._close()
            return
        if exchange.broker_id is not None and self.authenticated_broker is None:
            self._proven_broker(exchange.broker_id)
        self._respond(request, ib.SaslAuthenticateResponse(ErrorCode.NONE, None, answer))
        stats = self.metrics.for_request(request.api_key, request.api_version)
        stats.times.observe_immediate(_perf() - start)

    def _respond(self, request: RequestHeader, body: Any) -> None:
        """Answer now: straight to the output unless a request before it waits."""
        self._encode_into(self._answer_buffer(request), request, body)

    def _inject(self, request: Request) -> bool:
        """Apply error and disconnect faults to a request; True if it was answered (or its
        connection closed) by a fault."""
        if self.fault_check():
            return True
        if self.server.faults.drops(self.peer_broker_id):
            self.lossy = True  # its first request told who it is: it never arrived
            return True
        injected = self.server.faults.error_for(request.api_key)
        if injected is None:
            return False
        code, message = injected
        self.metrics.record_error(ApiKey(request.api_key).api_name, code)
        self._respond_error(request, code, message)
        return True

    def _client_software(self, software: tuple[str, str]) -> None:
        if self.client_software is not None:
            self.server.clients[self.client_software] -= 1
        self.client_software = software
        clients = self.server.clients
        clients[software] = clients.get(software, 0) + 1

    def fault_check(self) -> bool:
        """Close this connection if a disconnect or partition fault covers its peer, or if
        it lost bytes to a drop fault that has ended (what follows them cannot be read);
        re-check pausing."""
        faults = self.server.faults
        if self.lossy and not faults.drops(self.peer_broker_id):
            self.server.log.info("fault_lost_bytes", peer=self.peer, client_id=self.client_id)
            self._close()
            return True
        if faults.disconnects(self.peer_broker_id, self.client_id):
            self.server.log.info("fault_disconnect", peer=self.peer, client_id=self.client_id)
            self._close()
            return True
        self._update_reading()
        return False

    def _refuse(self, request: RequestHeader, exc: RequestError, start: float) -> None:
        """Answer a request that cannot be served as sent with a request-level error."""
        reason = exc.code.name.lower()
        self.metrics.record_bad_request(reason)
        key, version = request.api_key, request.api_version
        self.server.log_bad_input(self.peer, reason, exc.message, api_key=key, api_version=version)
        self._respond_error(request, exc.code, exc.message)
        stats = self.metrics.for_request(key, version, listener=self.metrics_listener)
        stats.times.observe_immediate(_perf() - start)

    def _complete(self, future: asyncio.Future[Any]) -> None:
        entry = self.pending.pop(future)
        if self.closing or future.cancelled():
            return
        waiting = entry.context
        assert waiting is not None
        request = waiting.request
        answer = bytearray()
        exc = future.exception()
        codec = self.codec
        if exc is None:
            body = future.result()
            try:
                if waiting.to_response is not None:
                    body = waiting.to_response(body)
            except Exception:
                self.server.log.exception("request_failed", peer=self.peer, api_key=request.api_key)
                self._encode_error_into(answer, request)
            else:
                self._encode_into(answer, request, body)
        elif isinstance(exc, RequestError):
            codec.encode_error_into(answer, request, exc.code, exc.message)
        else:
            self.server.log.error("request_failed", peer=self.peer, error=repr(exc))
            codec.encode_error_into(
                answer,
                request,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"unexpected server error: {exc!r}",
            )
        entry.answer = answer
        now = _perf()
        waiting.times.observe_delayed(
            waiting.local_end - waiting.start, now - waiting.local_end, now - waiting.start
        )
        self.in_flight.write_ready_answers(self.out)
        if self.out and not self.flush_scheduled:
            # Once, after every completion this loop pass brings: one operation completing
            # (a follower's fetch raising the high watermark) often completes many waiting
            # requests of one connection, and they go out in one write, not one each.
            self.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)
        self._update_reading()

    def _scheduled_flush(self) -> None:
        self.flush_scheduled = False
        self._flush()

    def _encode_into(self, out: bytearray, request: RequestHeader, body: Any) -> None:
        """Encode an answer; one that cannot be encoded (a handler's bug: a value its schema
        refuses) leaves no partial bytes and becomes the API's UNKNOWN_SERVER_ERROR answer,
        never a request left unanswered behind which the connection waits forever."""
        start = len(out)
        try:
            self.codec.encode_response_into(out, request, body)
        except Exception:
            del out[start:]
            self.server.log.exception(
                "response_encoding_failed", peer=self.peer, api_key=request.api_key
            )
            self._encode_error_into(out, request)

    def _encode_error_into(self, out: bytearray, request: RequestHeader) -> None:
        """The API's error answer with UNKNOWN_SERVER_ERROR; if even that cannot be made,
        the connection closes (its client then retries elsewhere or reports it)."""
        start = len(out)
        self.metrics.record_error("Unknown", ErrorCode.UNKNOWN_SERVER_ERROR)
        try:
            self.codec.encode_error_into(
                out, request, ErrorCode.UNKNOWN_SERVER_ERROR, "unexpected server error"
            )
        except Exception:
            del out[start:]
            self.server.log.exception("error_encoding_failed", peer=self.peer)
            self._close()

    def _respond_error(self, request: RequestHeader, code: int, message: str) -> None:
        self.codec.encode_error_into(self._answer_buffer(request), request, code, message)

    def _answer_buffer(self, request: RequestHeader) -> bytearray:
        return self.out if not self.in_flight else self._queued_answer(request)

    def _queued_answer(self, request: RequestHeader) -> bytearray:
        """Where an answer made now goes while a request before it waits: its own place
        behind them, written out when they are."""
        answer = bytearray()
        self.in_flight.add(request.correlation_id, None).answer = answer
        return answer

    def _flush(self) -> None:
        if self.out and self.transport is not None and not self.closing:
            self.metrics.network_out += len(self.out)
            self.transport.write(self.out)
            self.out = bytearray()

    def throttle(self, throttle_ms: int) -> None:
        """Read nothing more from the client for ``throttle_ms`` (its answer still goes
        out, carrying the throttle time): a client over its quota is muted, as Kafka mutes
        the channel of a throttled response (KIP-219). A later throttle ending later
        extends it."""
        loop = asyncio.get_running_loop()
        end = loop.time() + throttle_ms / 1000
        current = self._end_throttling
        if current is not None:
            if current.when() >= end:
                return
            current.cancel()
        self.throttled = True
        self._end_throttling = loop.call_at(end, self._unthrottle)
        self._update_reading()

    def _unthrottle(self) -> None:
        self.throttled = False
        self._end_throttling = None
        if not self.closing:
            self._handle_backlog()  # what came in the throttled request's read

    def _update_reading(self) -> None:
        if self.transport is None or self.closing:
            return
        should_pause = (
            self.server.faults.paused
            or self.throttled
            or self.writing_paused
            or bool(self.backlog)
            or len(self.in_flight) >= self.server.max_queued_requests
        )
        if should_pause and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    # -- bad input --------------------------------------------------------------------------

    def _bad_input(self, reason: str, message: str) -> None:
        self.metrics.record_bad_request(reason)
        self.server.log_bad_input(self.peer, reason, message)
        self._close()

    def _close(self) -> None:
        self._flush()
        self.closing = True
        if self.transport is not None:
            self.transport.close()
