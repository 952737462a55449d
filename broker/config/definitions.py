"""Every broker and topic config, gathered from the tables by area (Kafka's ConfigDef
of KafkaConfig). docs/configs.md lists every entry here."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef
from purgatory.broker.config.group_configs import GROUP_CONFIGS
from purgatory.broker.config.log_configs import LOG_CONFIGS, TOPIC_DEFAULT_CONFIGS
from purgatory.broker.config.quorum_configs import QUORUM_CONFIGS
from purgatory.broker.config.replication_configs import REPLICATION_CONFIGS
from purgatory.broker.config.security_configs import LISTENER_SASL_CONFIGS, SASL_CONFIGS
from purgatory.broker.config.server_configs import SERVER_CONFIGS
from purgatory.broker.config.share_coordinator_configs import SHARE_COORDINATOR_CONFIGS
from purgatory.broker.config.ssl_configs import SSL_CONFIGS
from purgatory.broker.config.topic_configs import TOPIC_CONFIGS as TOPIC_CONFIGS
from purgatory.broker.config.transaction_configs import TRANSACTION_CONFIGS

ENV_PREFIX = "PURGATORY_"
# Variables with the prefix that are not broker configs: the command-line tools' default
# addresses, the container entrypoint's start gate and address, the simulation's seeds. A broker
# started where they are set (a container with the tools, a user's shell) ignores them.
NOT_CONFIGS = frozenset(
    {
        "PURGATORY_BOOTSTRAP",
        "PURGATORY_ADMIN",
        "PURGATORY_CONTROL",
        "PURGATORY_WAIT_FOR_CONFIG",
        "PURGATORY_ADVERTISED_ADDRESS",
        "PURGATORY_SIM_SEEDS",
    }
)

DEFINITIONS: tuple[ConfigDef, ...] = (
    *SERVER_CONFIGS,
    *LOG_CONFIGS,
    *TOPIC_DEFAULT_CONFIGS,
    *REPLICATION_CONFIGS,
    *QUORUM_CONFIGS,
    *GROUP_CONFIGS,
    *TRANSACTION_CONFIGS,
    *SHARE_COORDINATOR_CONFIGS,
    *SASL_CONFIGS,
    *SSL_CONFIGS,
)
# The configs ``listener.name.<listener>.`` scopes to one listener.
LISTENER_SCOPED: tuple[str, ...] = (*LISTENER_SASL_CONFIGS, *(d.name for d in SSL_CONFIGS))

BY_NAME: dict[str, ConfigDef] = {}
for _d in DEFINITIONS:
    BY_NAME[_d.name] = _d
    for _alias in _d.aliases:
        BY_NAME[_alias] = _d
