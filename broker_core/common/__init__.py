"""Protocol facts every broker_core layer shares and that belong to none of them.

Why a package below the others: the response codes are answered by the Broker (errors, pull and pop
results), written by the remoting protocol and mapped by the gRPC adapter. The broker layer must not
import the remoting layer above it, so the one definition lives here and imports nothing of ours.
"""
