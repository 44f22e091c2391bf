"""One KRaft Kafka node whose clients must log in (SASL/PLAIN) and are checked against ACLs (StandardAuthorizer).

Why: the embedded broker has no ACLs, so team isolation on a real cluster (`docs/operations/teams.md`, "Teams
on a real cluster") can only be tested against a broker that enforces them. This is the embedded node with
its client listener swapped for a SASL_PLAINTEXT one (`CLIENT`), users from a dict, `User:admin` a super
user, and `allow.everyone.if.no.acl.found=false`, so a principal reaches only what an ACL grants it.

The controller listener stays PLAINTEXT on loopback, where every connection is `User:ANONYMOUS`, so
`User:ANONYMOUS` is a super user too. Why not only a SASL inter-broker listener with admin's credentials (the
inter-broker listener is `CLIENT`, logging in as admin, all the same): in KRaft the node registers with its
controller over the controller listener, and the controller checks CLUSTER_ACTION there; with `User:admin`
alone the node never came up ("User:ANONYMOUS is Denied operation = CLUSTER_ACTION ... ControllerRegistration").
The grant reaches no client of `CLIENT`, where every connection logs in as a named user; the loopback
controller port is the one door it opens (a SASL controller listener would close it, at more configuration).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from seamlessflow.broker.kraft import Node, nodes, server_properties
from seamlessflow.broker.local import LocalBroker
from seamlessflow.config import Settings

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SecuredBroker(LocalBroker):
    """A single node; `settings_for(user)` are the client settings of one of `users` ({user: password}; an
    `admin` with a random password is added unless given)."""

    def __init__(self, data_dir: Path, users: dict[str, str]):
        super().__init__(data_dir, brokers=1)
        self.users = {"admin": secrets.token_hex(8), **users}

    def settings_for(self, user: str) -> Settings:
        sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": self.users[user]}
        return self.settings.with_overrides(bootstrap_servers=self.settings.kafka_bootstrap, kafka=sasl)

    @property
    def client_settings(self) -> Settings:
        return self.settings_for("admin")

    def prepare(self) -> None:
        """The storage formatted with the plain properties (PLAIN keeps no credentials there); the node then
        runs with the secured ones."""
        super().prepare()
        node = nodes(self.settings)[0]
        node.properties.write_text("".join(f"{k}={v}\n" for k, v in self.properties(node).items()))

    def properties(self, node: Node) -> dict[str, str]:
        accounts = " ".join(f'user_{user}="{password}"' for user, password in self.users.items())
        login = f'{LOGIN_MODULE} required username="admin" password="{self.users["admin"]}" {accounts};'
        host, controller = f"127.0.0.1:{node.port}", f"127.0.0.1:{node.controller_port}"
        return {
            **server_properties(node, [node]),
            "listeners": f"CLIENT://{host},CONTROLLER://{controller}",
            "advertised.listeners": f"CLIENT://{host}",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "CLIENT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": login,
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
