"""``mqbroker``: the main job — a name server and a broker serving the RocketMQ remoting protocol.

By default one process runs both (name server on namesrvPort 9876, broker on listenPort 10911,
127.0.0.1); ``--namesrv-only`` / ``--broker-only`` run one of them (a name server alone listens on
the ``-c`` file's listenPort unless it names a namesrvPort, as Apache's ``mqnamesrv -c``), and
``-n host:port[;host:port]`` (or, without
-n, ``namesrvAddr`` in the ``-c`` file, as Apache's ``mqbroker -c``) makes the broker register with
those name servers (no embedded one then). Port 0 picks a free port; the
"boot success" lines name the real addresses. The broker takes the store lock (so ``mqadmin --store``
state changes on that store are refused and name ``-n``), runs its background services and stops
cleanly on SIGTERM/SIGINT: it unregisters, closes connections, flushes, checkpoints, saves offsets
and removes the ``abort`` file. A file it cannot save then (a full disk) is named, ``abort`` stays and
the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shlex
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from broker_core.auth.errors import AuthStoreError
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig, check_port, resolve_broker_ip
from broker_core.config_loader import ConfigError, read_properties_file, snake_to_camel, values_of
from broker_core.net.broker_server import BrokerRemotingServer, register_broker_request
from broker_core.net.grpc_v2.cluster_route import NamesrvClusterRoutes
from broker_core.net.grpc_v2.server import GrpcEndpoint, GrpcServerConfig
from broker_core.net.namesrv import NameServer, NamesrvConfig
from broker_core.net.net_config import NetConfig, check_idle_seconds
from broker_core.net.outbound import IllegalAddressError, checked_addresses, split_addresses
from broker_core.remoting.header_codec import encode_header
from broker_core.store.config_file import ConfigFileError
from broker_core.store.index_file import IndexFileError
from broker_core.store.store_dir import store_dir_from
from broker_core.store.store_lock import StoreLockedError, is_store_locked


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="mqbroker", description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--configFile", dest="config", help="broker config (key=value or YAML, RocketMQ keys)")
    ap.add_argument("--store", default=None, help="store root (default: $RMQ_STORE, else storePathRootDir, else ./store)")
    ap.add_argument("-n", "--namesrvAddr", dest="namesrv", default=None,
                    help="register with these name servers (host:port;host:port) instead of an embedded one; "
                         "replaces the -c file's namesrvAddr, which does the same")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--namesrv-only", action="store_true", help="run only the name server")
    only.add_argument("--broker-only", action="store_true", help="run only the broker (needs -n or namesrvAddr)")
    ap.add_argument("--host", default=None, help="address to listen on and advertise (default brokerIP1, 127.0.0.1)")
    ap.add_argument("--listenPort", type=int, default=None,
                    help="broker port (default listenPort, 10911; 0 = free); with --namesrv-only the name server's")
    ap.add_argument("--namesrvPort", type=int, default=None,
                    help="name server port (default namesrvPort, 9876, or with --namesrv-only the -c file's "
                         "listenPort; 0 = free)")
    ap.add_argument("--registerNameServerPeriod", type=int, default=None, help="ms between registrations (30000; "
                    "taken within [100, 60000])")
    ap.add_argument("--brokerChannelExpiredTime", type=int, default=None,
                    help="ms without registration before the name server drops a broker (120000)")
    ap.add_argument("--kvConfigPath", default=None,
                    help="name server KV config file (default kvConfigPath, else <store>/namesrv/kvConfig.json)")
    ap.add_argument("--scanNotActiveBrokerInterval", type=int, default=None, help="ms between expiry scans (5000)")
    ap.add_argument("--idleTimeout", type=float, default=None, help="seconds before an idle connection is closed (120; 0 = never)")
    ap.add_argument("--frameMaxLength", type=int, default=None, help="largest accepted frame in bytes (16 MiB; at least 65536)")
    ap.add_argument("--grpc-port", "--grpcServerPort", dest="grpc_port", type=int, default=None,
                    help="gRPC v2 endpoint port (default grpcServerPort, 8081; 0 = off; with listenPort 0 (--listenPort "
                         "or the config) and no grpcServerPort it also takes a free port)")
    return ap.parse_args(argv)


HEADER_LENGTH_MAX = 0xFFFFFF  # a frame's header length is 24 bits (the top byte is the serialize type)


class _ListenError(Exception):
    """A listening socket could not be made; the message names the endpoint and its address."""


def _bind(what: str, host: str, port: int) -> socket.socket:
    """A listening socket for ``what``. Why the address in the error: with a name server and a broker in
    one process, "address in use" alone does not say which of 9876 or 10911 another process holds.
    The family is the host's (getaddrinfo): an IPv6 brokerIP1 or --host (``::1``), which the store stamps
    as a STOREHOSTADDRESS_V6 host, is listened on as Apache's broker listens on it."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (OSError, UnicodeError):
        family = socket.AF_INET  # the bind below names what is wrong with the host
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as e:
        sock.close()
        raise _ListenError(f"cannot listen for {what} on {host}:{port}: {e.strerror or e}") from None
    sock.setblocking(False)
    return sock


def _namesrv_port(args: argparse.Namespace, props: dict[str, str], net: NetConfig, config: BrokerConfig) -> int:
    """The name server's port. With a broker in the process, listenPort is the broker's and the name
    server's is namesrvPort (--namesrvPort, else the file's, else 9876). A name server alone
    (--namesrv-only) reads listenPort as its own, as Apache's ``mqnamesrv -c namesrv.properties`` does:
    --namesrvPort, then --listenPort, then the file's namesrvPort (a file shared with ``mqbroker -c``
    names the broker's listenPort beside it), then the file's listenPort, then 9876. Why: the file's
    listenPort was ignored and the name server bound 9876 where nobody looked for it."""
    if args.namesrvPort is not None or not args.namesrv_only:
        return net.namesrv_port  # --namesrvPort is already in it
    if args.listenPort is not None:
        return int(args.listenPort)
    if "namesrvPort" in props or "listenPort" not in props:
        return net.namesrv_port
    return config.listen_port


def _check_namesrv_addrs(text: str | None, source: str) -> None:
    """Every ``host:port`` of a name server list, as Apache's BrokerStartup checks namesrvAddr before
    anything starts (a bad one was a ValueError traceback at the first registration)."""
    if not text or not text.strip():
        return
    try:
        checked_addresses(text)
    except IllegalAddressError as e:
        raise ConfigError(f"The Name Server Address[{text}] ({source}) illegal: {e}; set it as "
                          '"127.0.0.1:9876;192.168.0.1:9876"') from None


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (a faster libuv loop), else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _follow_namesrv(broker: Broker, routes: NamesrvClusterRoutes | None) -> Callable[[list[str]], None]:
    """What follows the broker to new name servers (updateBrokerConfig namesrvAddr): the store's note of
    them and the gRPC endpoint's routes."""
    def moved(addrs: list[str]) -> None:
        broker.announce_namesrv(addrs)
        if routes is not None:
            routes.use_namesrv_addrs(addrs)
    return moved


async def _serve(broker: Broker | None, net: NetConfig, namesrv_sock: socket.socket | None,
                 broker_sock: socket.socket | None, namesrv_addrs: list[str], host: str,
                 grpc_port: int | None = None, namesrv_config: NamesrvConfig | None = None,
                 namesrv_source: str | None = None) -> None:
    """Serve until SIGTERM/SIGINT. ``namesrv_source`` says where the broker's name servers came from
    (-n, the -c file's namesrvAddr) when this process runs none of its own: the boot lines say so."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    namesrv: NameServer | None = None
    server: BrokerRemotingServer | None = None
    grpc_endpoint: GrpcEndpoint | None = None
    routes: NamesrvClusterRoutes | None = None
    try:
        if broker is not None and broker_sock is not None and grpc_port is not None:
            # first: a gRPC port in use (a second broker on one host keeps grpcServerPort 8081) fails the
            # start in one line before anything says "boot success"
            # QueryRoute answers from the name servers' routes: every broker of the topic, not this one alone.
            # Made with no name server too (-n ';'): it then answers with this broker's queues, and one given
            # later (updateBrokerConfig namesrvAddr) reaches it through _follow_namesrv; without it the
            # endpoint kept that local view until a restart, though the broker registered in the cluster
            routes = NamesrvClusterRoutes.for_broker(broker.config, namesrv_addrs)
            endpoint = GrpcEndpoint(broker, GrpcServerConfig.from_broker_config(broker.config, host, grpc_port),
                                    cluster_routes=routes)
            await endpoint.start()
            grpc_endpoint = endpoint
        if namesrv_sock is not None:
            namesrv = NameServer(namesrv_config, net.server_config())
            await namesrv.start(sock=namesrv_sock)
            print(f"The Name Server boot success. serializeType=JSON, address {host}:{namesrv.port}", flush=True)
        if broker is not None and broker_sock is not None:
            server = BrokerRemotingServer(broker, namesrv_addrs, register_period_ms=net.register_name_server_period,
                                          heartbeat_timeout_ms=net.broker_channel_expired_time,
                                          server_config=net.server_config(),
                                          on_namesrv_change=_follow_namesrv(broker, routes))
            await server.start(sock=broker_sock)
            cfg = broker.config
            names = f"name server is {';'.join(namesrv_addrs)}" if namesrv_addrs else "no name server"
            print(f"The broker[{cfg.broker_name}, {cfg.broker_addr}] boot success. serializeType=JSON and {names} "
                  f"(cluster {cfg.broker_cluster_name}, store {broker.root.resolve()}, "
                  f"config {cfg.broker_config_path or 'none'}, pid {os.getpid()})", flush=True)
            where = _commit_log_elsewhere(broker)
            if where:
                print(where, flush=True)
            if grpc_endpoint is not None:
                print(f"The gRPC v2 endpoint boot success on {host}:{grpc_endpoint.port}"
                      f"{' (TLS)' if cfg.grpc_tls_cert_path else ''}", flush=True)
            if namesrv_source is not None and not namesrv_addrs:  # -n ';': Apache's broker runs alone too
                print("No name server: -n names none, so the broker registers nowhere until "
                      "updateBrokerConfig -k namesrvAddr gives it some", flush=True)
            elif namesrv_source is not None:
                print(f"No embedded name server: the broker registers with {namesrv_source} "
                      "(mqbroker runs its own only without -n and without namesrvAddr in its -c file)", flush=True)
        if namesrv_addrs:
            addr = shlex.quote(";".join(namesrv_addrs))
            cluster = broker.config.broker_cluster_name if broker else "DefaultCluster"
            print("\n".join([
                "Use it from another shell (. .venv/bin/activate first):",
                f"  mqadmin clusterList -n {addr}",
                f"  mqadmin updateTopic -n {addr} -c {cluster} -t MyTopic",
                f"  mqadmin sendMessage -n {addr} -t MyTopic -p 'hello' -k key-1",
                f"  mqadmin queryMsgByKey -n {addr} -t MyTopic -k key-1",
                f"  mqadmin topicStatus -n {addr} -t MyTopic",
                "Ctrl-C (or SIGTERM) stops it cleanly."]), flush=True)
        await stop.wait()
    finally:
        if grpc_endpoint is not None:
            await grpc_endpoint.stop()
        if server is not None:
            await server.stop()
        if namesrv is not None:
            await namesrv.stop()


def _commit_log_elsewhere(broker: Broker) -> str | None:
    """One line naming the commitlog directory when it is not ``commitlog`` under the store root (a
    storePathCommitLog outside the file's storePathRootDir stays where the file says, --store or not), so
    the operator sees which disk takes the messages; None when it is in the store."""
    log_dir = broker.config.store.commit_log_dir
    if log_dir.resolve() == (broker.root / "commitlog").resolve():
        return None
    source = broker.config.broker_config_path or "the config"
    return f"The commitlog is in {log_dir.resolve()} (storePathCommitLog in {source}), outside the store " \
           f"{broker.root.resolve()}"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parse(argv)
    try:
        props = read_properties_file(args.config) if args.config else {}
        root = store_dir_from(args.store, props.get("storePathRootDir"))
        with values_of(args.config):
            config = BrokerConfig.from_properties(props, root)
            net = NetConfig.from_properties(props)
            namesrv_config = NamesrvConfig.from_properties(props)
        if args.config:  # brokerConfigPath, as Apache's BrokerStartup: where updateBrokerConfig persists
            config.started_with(args.config)
    except ConfigError as e:
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    try:
        # the command line's ports and host as the file's are checked: one line naming the flag or key
        for flag, port in (("--listenPort", args.listenPort), ("--namesrvPort", args.namesrvPort),
                           ("--grpc-port", args.grpc_port)):
            if port is not None:
                check_port(flag, port)
        # the net flags as their config keys: the same range, one line naming the flag
        for key in ("namesrv_port", "register_name_server_period", "broker_channel_expired_time",
                    "scan_not_active_broker_interval", "frame_max_length"):
            flag = snake_to_camel(key)
            value = getattr(args, flag)
            if value is not None:
                net.override(f"--{flag}", key, value)
        if args.idleTimeout is not None:
            check_idle_seconds("--idleTimeout", args.idleTimeout)
            net.server_channel_max_idle_time_seconds = args.idleTimeout
        host = resolve_broker_ip(args.host, "--host") if args.host else config.broker_ip1
        if args.namesrv is not None:  # -n replaces the file's namesrvAddr, as in Apache's BrokerStartup
            _check_namesrv_addrs(args.namesrv, "-n")
        else:
            _check_namesrv_addrs(config.namesrv_addr, f"namesrvAddr in {args.config}")
    except ConfigError as e:
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    config.broker_ip1 = host
    net.namesrv_port = _namesrv_port(args, props, net, config)
    run_broker = not args.namesrv_only
    # the name servers the broker registers with: -n, else the -c file's namesrvAddr (Apache's
    # ``mqbroker -c`` registers there); only with neither does this process run its own name server
    external, namesrv_source = None, None
    if run_broker and args.namesrv:
        external, namesrv_source = args.namesrv, "the name servers -n names"
    elif run_broker and split_addresses(config.namesrv_addr):
        external, namesrv_source = config.namesrv_addr, f"namesrvAddr in {args.config}"
    run_namesrv = args.namesrv_only or (not args.broker_only and not external)
    if run_broker and not run_namesrv and not external:
        print("mqbroker: --broker-only needs name server addresses (-n host:port or namesrvAddr)", file=sys.stderr)
        return 1
    if run_broker and is_store_locked(root):  # say so before a port clash (the broker holding it has the ports)
        print(f"mqbroker: store {root} is locked by a running broker", file=sys.stderr)
        return 1
    namesrv_sock = broker_sock = None
    listen_port = config.listen_port if args.listenPort is None else args.listenPort  # the flag, else the file
    try:
        if run_namesrv:
            namesrv_sock = _bind("the name server", host, net.namesrv_port)
        if run_broker:
            broker_sock = _bind("the broker", host, listen_port)
    except _ListenError as e:
        if namesrv_sock is not None:
            namesrv_sock.close()
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    grpc_port: int | None = None  # None: no gRPC endpoint; 0: a free port
    if run_broker:
        if args.grpc_port is not None:
            grpc_port = args.grpc_port or None
        elif listen_port == 0 and "grpcServerPort" not in props:
            # every port chosen by the system (tests, several brokers on one host), whether listenPort=0
            # came from --listenPort or the config file; a grpcServerPort the file names still wins
            grpc_port = 0
        else:
            grpc_port = config.grpc_server_port or None
        if grpc_port is None:  # off: GET_BROKER_CONFIG says so (other brokers leave us out of gRPC routes)
            config.grpc_server_port = 0
    namesrv_config.listen_host = host
    namesrv_config.scan_not_active_broker_interval = net.scan_not_active_broker_interval
    namesrv_config.broker_channel_expired_time = net.broker_channel_expired_time
    namesrv_config.kv_config_path = str(Path(args.kvConfigPath or props.get("kvConfigPath")
                                             or root / "namesrv" / "kvConfig.json"))
    if args.config:  # where updateNamesrvConfig writes (Apache: configStorePath, ~/namesrv/namesrv.properties)
        namesrv_config.config_store_path = str(Path(args.config).resolve())
    broker: Broker | None = None
    clean = True
    try:
        if broker_sock is not None:
            config.listen_port = broker_sock.getsockname()[1]  # before the Broker: it stamps store hosts
            if root.exists() and not root.is_dir():  # else the first file read under it names the cause
                print(f"mqbroker: cannot open store {root}: it is a file, not a store directory", file=sys.stderr)
                return 1
            try:
                broker = Broker(root, config)
            except StoreLockedError as e:
                print(f"mqbroker: {e}", file=sys.stderr)
                return 1
            except IndexFileError as e:  # a store of other geometry (e.g. Apache's, without its -c)
                print(f"mqbroker: cannot open store {root}: {e}; give -c with the store's "
                      "maxHashSlotNum/maxIndexNum", file=sys.stderr)
                return 1
            except (OSError, ValueError, ConfigFileError, AuthStoreError) as e:
                print(f"mqbroker: cannot open store {root}: {e}", file=sys.stderr)
                return 1
            broker.start()
            too_big = _registration_too_big(broker, net)
            if too_big:
                print(f"mqbroker: {too_big}", file=sys.stderr)
                return 1
        addrs = split_addresses(external) if external else \
            [f"{host}:{namesrv_sock.getsockname()[1]}"] if namesrv_sock is not None else []
        if broker is not None and addrs:
            # getBrokerConfig shows the name servers in use (Apache's BrokerStartup copies -n into
            # brokerConfig), and updateBrokerConfig namesrvAddr changes them from there
            broker.config.namesrv_addr = ";".join(addrs)
            broker.announce_namesrv(addrs)
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            runner.run(_serve(broker, net, namesrv_sock, broker_sock, addrs, host, grpc_port, namesrv_config,
                              namesrv_source))
    except ConfigFileError as e:  # a damaged kvConfig.json (and .bak): one line naming the files
        print(f"mqbroker: name server: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the gRPC endpoint's port (its bind happens inside grpc's server)
        print(f"mqbroker: {e}", file=sys.stderr)
        return 1
    finally:
        if broker is not None:
            broker.shutdown()
            clean = _report_shutdown(broker)
        for s in (namesrv_sock, broker_sock):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()
    return 0 if clean else 1


def _registration_too_big(broker: Broker, net: NetConfig) -> str | None:
    """Why the broker's REGISTER_BROKER could never reach a name server, or None.

    Why at start: Apache sets no length limit on brokerName or brokerClusterName, but a frame over
    frameMaxLength is refused by the name server (a 30 MB brokerName: every registration closed the
    connection, the broker never appeared in a route, and still printed "boot success")."""
    req = register_broker_request(broker, net.broker_channel_expired_time)
    header_len = len(encode_header(req))
    length = 4 + header_len + len(req.body or b"")  # the frame's length field, held to frameMaxLength
    if length <= net.frame_max_length and header_len <= HEADER_LENGTH_MAX:
        return None
    cfg = broker.config
    return (f"the broker's registration is {length} bytes, over frameMaxLength {net.frame_max_length} "
            f"(brokerName {len(cfg.broker_name)} and brokerClusterName {len(cfg.broker_cluster_name)} characters, "
            f"{len(broker.registration().topics)} topics): the name server would refuse it; shorten the names")


def _report_shutdown(broker: Broker) -> bool:
    """Say how the broker shut down; False when something could not be saved.

    Why: a config file the disk could not take at shutdown (consumerOffset.json: the offsets committed
    since the last flush) is lost; claiming a clean shutdown and exiting 0 hid that from the operator
    and from whatever supervises the process. Each failure is one line naming the file.
    """
    if not broker.unsaved_at_shutdown:
        print("The broker shut down cleanly.", flush=True)
        return True
    for what in broker.unsaved_at_shutdown:
        print(f"mqbroker: not saved at shutdown: {what}", file=sys.stderr, flush=True)
    print("The broker did NOT shut down cleanly: what is named above was not saved "
          "(the store's abort file is kept, so the next start recovers as after a crash).", flush=True)
    return False


if __name__ == "__main__":
    sys.exit(main())
