"""The RocketMQ 5.x gRPC endpoint (apache.rocketmq.v2 MessagingService), a thin adapter over the Broker."""
