"""Named listeners' settings checked against each other, as Kafka checks them: each
mistake stops the broker at start with a message that names the setting to change."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.config.listeners import ListenerRole
from tests.support import broker_config

THREE = {
    "listeners": "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "BROKER",
    "controller.listener.names": "CONTROLLER",
}


def listeners(**values: Any) -> Any:
    return broker_config(0, **values).listener_config()


def test_the_default_is_one_plaintext_listener_serving_clients_brokers_and_the_quorum() -> None:
    config = listeners(listeners="127.0.0.1:9092")  # a bare address is PLAINTEXT
    [listener] = config.listeners
    assert (listener.name, listener.port, listener.role) == (
        "PLAINTEXT",
        9092,
        ListenerRole.INTER_BROKER,
    )
    assert config.broker_facing is listener and listener.serves_clients and listener.serves_brokers


def test_three_listeners_each_play_their_role_and_only_the_controllers_is_not_advertised() -> None:
    config = listeners(**THREE, **{"advertised.listeners": "CLIENT://kafka.example:19092"})
    roles = {x.name: x.role for x in config.listeners}
    assert roles == {
        "CLIENT": ListenerRole.CLIENT,
        "BROKER": ListenerRole.INTER_BROKER,
        "CONTROLLER": ListenerRole.CONTROLLER,
    }
    assert config.broker_facing.name == "CONTROLLER"
    assert config.advertised_endpoints({"CLIENT": 9092, "BROKER": 9093, "CONTROLLER": 9094}) == [
        ("CLIENT", "kafka.example", 19092),
        ("BROKER", "127.0.0.1", 9093),
    ]


def test_a_wildcard_listener_is_advertised_at_this_machines_name_and_its_bound_port() -> None:
    config = listeners(listeners="PLAINTEXT://0.0.0.0:0")
    assert config.advertised_endpoints({"PLAINTEXT": 40001}) == [
        ("PLAINTEXT", socket.gethostname(), 40001)
    ]


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"listeners": "A://h:1,A://h:2"}, "appears twice"),
        ({"listeners": "A://h:1,B://h:1"}, "same port"),
        ({"listeners": "INTERNAL://h:1"}, r"add INTERNAL:PLAINTEXT \(or SSL, SASL_PLAINTEXT"),
        (
            {
                "listeners": "A://h:1,B://h:2",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
            },
            "set inter.broker.listener.name",
        ),
        ({**THREE, "inter.broker.listener.name": "NOPE"}, "is not among listeners"),
        ({**THREE, "inter.broker.listener.name": "CONTROLLER"}, "is a controller listener"),
        ({**THREE, "controller.listener.names": "ELSEWHERE"}, "which listeners does not"),
        ({**THREE, "advertised.listeners": "OTHER://h:1"}, "which listeners does not"),
        ({**THREE, "advertised.listeners": "CONTROLLER://h:1"}, "never advertised|controller"),
        ({**THREE, "advertised.listeners": "CLIENT://h:0"}, "port 0"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "not a security protocol"),
        ({"listeners": "bad name://h:1"}, "is not a name"),
    ],
)
def test_a_mistake_names_what_to_change(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        listeners(**values)


def test_a_broker_only_node_binds_no_controller_listener() -> None:
    values: dict[str, Any] = {
        **THREE,
        "cluster.members": "0@127.0.0.1:9094,1@127.0.0.1:9194",
        "controller.quorum.voters": "1@127.0.0.1:9194",
    }
    with pytest.raises(ValueError, match="not a controller"):
        listeners(**values)
    values["listeners"] = "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093"
    config = broker_config(0, **values).listener_config()
    assert config.broker_facing.name == "BROKER"


def test_a_members_port_must_be_its_controller_listeners_else_its_inter_broker_listeners() -> None:
    members, three = "0@127.0.0.1:9094,1@127.0.0.1:9194", dict[str, Any](THREE)
    assert broker_config(0, members=members, **three).member_address_problem() is None
    wrong = broker_config(0, members="0@127.0.0.1:9093,1@127.0.0.1:9194", **three)
    assert wrong.member_address_problem("--port", "--cluster") == (
        "--port puts node 0's CONTROLLER listener on port 9094, but --cluster gives node 0 the "
        "address 127.0.0.1:9093, where the other nodes reach it (a member's address is its "
        "controller listener's, controller.listener.names, else its inter-broker "
        "listener's): give both the same port"
    )
    plain = broker_config(0, members="0@127.0.0.1:9092,1@127.0.0.1:9192", port=9093)
    assert "PLAINTEXT listener on port 9093" in (plain.member_address_problem() or "")
    # Port 0 is checked once bound; a node not given listeners listens at its entry.
    assert broker_config(0, members=members, port=0).member_address_problem() is None
    unset = load_config(environ={}, overrides={"broker.id": 0, "cluster.members": members})
    assert unset.member_address_problem() is None
