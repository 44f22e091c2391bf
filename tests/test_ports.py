"""The address a server hands out: what it binds, or for a wildcard bind its node's as the placement says."""

import pytest

from seamlessflow.ports import NODE_ADDRESS_ENV, reachable_host


@pytest.mark.parametrize("bind, node, handed_out", [
    ("127.0.0.1", "10.0.0.7", "127.0.0.1"),  # a server on loopback is only this host's
    ("10.1.2.3", "10.0.0.7", "10.1.2.3"),
    ("0.0.0.0", "10.0.0.7", "10.0.0.7"),  # every address: the node's, as its placement gave it
    ("0.0.0.0", None, "127.0.0.1"),  # one machine, nothing set: loopback reaches it
    ("::", "10.0.0.7", "10.0.0.7"),
])
def test_reachable_host(monkeypatch, bind, node, handed_out):
    if node is None:
        monkeypatch.delenv(NODE_ADDRESS_ENV, raising=False)
    else:
        monkeypatch.setenv(NODE_ADDRESS_ENV, node)
    assert reachable_host(bind) == handed_out


def test_the_interface_of_an_address_is_found_and_an_address_not_here_has_none():
    from seamlessflow.ports import interface_of

    assert interface_of("127.0.0.1") == "lo"
    assert interface_of("203.0.113.9") is None  # TEST-NET-3: never this host's


def test_a_block_is_found_below_the_ephemeral_range_where_clients_take_their_ports(tmp_path):
    from seamlessflow.ports import ephemeral_range, free_port_block

    low, _ = ephemeral_range()
    assert all(20000 <= free_port_block(4) <= low - 4 for _ in range(20))
    weird = tmp_path / "range"
    weird.write_text("not a range")
    assert ephemeral_range(str(weird)) == (32768, 60999)
