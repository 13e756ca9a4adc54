"""What every broker_core layer shares and none of them owns; it imports nothing else of ours.

Why a package below the others: the response codes are a protocol fact answered by the Broker (errors,
pull and pop results), written by the remoting protocol and mapped by the gRPC adapter, and the broker
layer must not import the remoting layer above it. The lazy package exports serve auth and pop alike.
"""
