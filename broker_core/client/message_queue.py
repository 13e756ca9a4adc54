"""MessageQueue: (topic, brokerName, queueId), ordered as RocketMQ orders it (topic, broker, queue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """The fastjson shape the broker reads in LOCK/UNLOCK_BATCH_MQ bodies (keys sorted)."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MessageQueue:
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"
