"""updateBrokerConfig -n of namesrvAddr moves the running broker to the new name servers.

Why: Apache's BrokerController re-reads brokerConfig.namesrvAddr before registering, so the update
takes effect; here the list was fixed at start, and the update printed success while the broker stayed
where it was. A value that is not a host:port list was taken too (the broker then registered nowhere),
and a broker started with ``-n`` showed ``namesrvAddr =`` (empty), though Apache's BrokerStartup copies
-n into brokerConfig."""

from __future__ import annotations

import re
from pathlib import Path

from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker
from tests.waiting import wait_for


def _listed(namesrv: str) -> set[str]:
    """The broker names a name server's clusterList shows."""
    r = mqadmin("clusterList", "-n", namesrv)
    return {line.split()[1] for line in r.stdout.splitlines()[1:] if line.split()}


def _namesrv_addr(n: str, addr: str) -> str:
    r = mqadmin("getBrokerConfig", "-n", n, "-b", addr)
    assert r.returncode == 0, r.stderr
    m = re.search(r"^namesrvAddr\s+=\s*(\S*)$", r.stdout, re.M)
    assert m is not None, r.stdout
    return m.group(1)


def test_a_new_namesrv_addr_moves_the_broker_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    with running_broker(tmp_path / "one", broker_name="broker-z", cluster="Other") as one, \
            running_broker(tmp_path / "two", broker_name="broker-y", cluster="Other") as two, \
            running_broker(tmp_path / "a", namesrv=one.namesrv_addr) as a:
        ns1, ns2, addr = one.namesrv_addr, two.namesrv_addr, a.broker_addr
        assert _namesrv_addr(ns1, addr) == ns1  # -n is the broker's namesrvAddr
        for bad in ("garbage", "127.0.0.1:abc", ""):
            r = mqadmin("updateBrokerConfig", "-n", ns1, "-b", addr, "-k", "namesrvAddr", "-v", bad)
            assert r.returncode == 1, r.stdout + r.stderr
            assert r.stderr.startswith("mqadmin updateBrokerConfig: invalid broker config: namesrvAddr: "), r.stderr
            assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert _namesrv_addr(ns1, addr) == ns1  # nothing changed

        r = mqadmin("updateBrokerConfig", "-n", ns1, "-b", addr, "-k", "namesrvAddr", "-v", f"{ns1};{ns2}")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: "broker-a" in _listed(ns2), "broker-a to register with the added name server")
        assert "broker-a" in _listed(ns1)

        r = mqadmin("updateBrokerConfig", "-n", ns1, "-b", addr, "-k", "namesrvAddr", "-v", ns2)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: "broker-a" not in _listed(ns1), "the dropped name server to lose broker-a")
        assert _listed(ns2) == {"broker-a", "broker-y"} and _namesrv_addr(ns2, addr) == ns2


def test_grpc_routes_follow_the_broker_to_its_new_name_servers(tmp_path: Path) -> None:
    """After the move a gRPC client asking broker-a for a route gets it from the new name server (broker-y's
    queues there too); the old name server, which dropped broker-a, had none, so only broker-a's own
    queues were listed."""
    import grpc

    from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc

    with running_broker(tmp_path / "one", broker_name="broker-z", cluster="Other") as one, \
            running_broker(tmp_path / "two", broker_name="broker-y", extra_args=("--registerNameServerPeriod", "500")) as two, \
            running_broker(tmp_path / "a", namesrv=one.namesrv_addr,
                           extra_args=("--registerNameServerPeriod", "500")) as a:
        ns1, ns2 = one.namesrv_addr, two.namesrv_addr
        for broker in (two, a):
            r = mqadmin("updateTopic", "-n", ns2 if broker is two else ns1, "-b", broker.broker_addr, "-t", "Moved",
                        "-r", "2", "-w", "2")
            assert r.returncode == 0, r.stderr
        r = mqadmin("updateBrokerConfig", "-n", ns1, "-b", a.broker_addr, "-k", "namesrvAddr", "-v", ns2)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: "broker-a" in _listed(ns2), "broker-a to register with the new name server")
        assert a.grpc_addr is not None
        port = int(a.grpc_addr.rpartition(":")[2])
        md = (("x-mq-client-id", "moved@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))

        def brokers_in_route() -> set[str]:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = service_pb2_grpc.MessagingServiceStub(ch)
                route = stub.QueryRoute(pb.QueryRouteRequest(
                    topic=pb.Resource(name="Moved"),
                    endpoints=pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                                           addresses=[pb.Address(host="127.0.0.1", port=port)])),
                    metadata=md, timeout=10)
            return {q.broker.name for q in route.message_queues}

        wait_for(lambda: brokers_in_route() == {"broker-a", "broker-y"}, "broker-a's gRPC route to list broker-y", 15)
