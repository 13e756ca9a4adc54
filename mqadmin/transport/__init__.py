"""Transports under the Admin: ``base.BrokerClient`` (the Protocol), ``local`` (in-process Broker),
``remoting`` (TCP to a name server and brokers)."""
