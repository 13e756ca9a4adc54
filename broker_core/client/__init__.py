"""rmqops' own RocketMQ remoting client: producer, pull consumer, push consumer (cluster + orderly), simple (POP) consumer.

Why it lives in broker_core: mqadmin's RemotingBrokerClient, the benchmarks and the tests all speak
the remoting protocol through it, on top of the pure protocol package ``broker_core.remoting``.
Layout (one purpose per module):

- ``route``: what producers and consumers read from TopicRouteData (MessageQueue is the protocol's).
- ``allocate`` / ``selector``: who consumes which queue; which queue a send goes to.
- ``process_queue`` / ``offset_store``: per-queue in-flight messages and the consumer offsets.
- ``rebalance``: the cluster-mode assignment state machine (with queue locks for orderly mode).
- ``connection`` / ``instance``: sockets, request/response by opaque, broker->client requests.
- ``producer`` / ``pull_consumer`` / ``push_consumer`` / ``simple_consumer``: the user-facing clients.
"""
