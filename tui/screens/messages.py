"""Screen 5, Messages: query by key, unique key, message id or queue offset, or browse a queue page
by page; the highlighted message's fields, properties and body (text, pretty JSON or hex). Queues and
offsets are per broker: with several brokers a choice says which one a browse or an offset read goes to
(by default the first broker that has the topic, not simply the first broker).

The status line repeats what was typed and the Admin's errors, so it is literal text, never markup
(``[/]`` typed as a key must be searched for, not parsed). A negative offset is refused here with the
broker's own words: the store-mode read once treated it as 0 and showed offset 0's message.

A query by key, unique key or message id goes to every broker of the topic's route but those left out
as not answering (see tui.poller): the answer comes from the others, and the status line names the
brokers left out, so "0 message(s)" is not read as "no such message anywhere". With several brokers it
asks them one at a time: one that hangs before a refresh has left it out is named, left out, and the
others' messages are still shown (one call over all of them timed out as a whole, blaming the name server).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Label, Select

from mqadmin.admin import Admin, BrokerIdentity, MessageRecord
from mqadmin.errors import AdminError, NotFoundError
from tui import format as fmt
from tui.poller import Poller
from tui.screens.base import DashboardScreen
from tui.snapshot import History, Snapshot
from tui.widgets.filter_table import FilterTable
from tui.widgets.message_view import MessageView

PAGE = 20
ANY_BROKER = "*"
"""The broker choice meaning: the first broker (in the cluster's order) that has the topic."""
MODES = [("by key", "key"), ("by unique key", "uniq"), ("by message id", "id"), ("at queue offset", "offset"),
         ("browse a queue", "browse")]


class MessagesScreen(DashboardScreen):
    TITLE = "Messages"
    BINDINGS = [Binding("b", "body_view", "Body view"), Binding("n", "page(1)", "Next page"),
                Binding("p", "page(-1)", "Prev page")]

    def __init__(self) -> None:
        super().__init__()
        self.results: list[MessageRecord] = []
        self.broker_name = ""
        self.broker_names: list[str] = []
        self.identities: dict[str, BrokerIdentity] = {}
        self._by_time = False
        self.topic_brokers: dict[str, list[str]] = {}
        self._browse_at: int | None = None
        self._what = ""

    def compose_body(self) -> Iterable[Widget]:
        with Horizontal(classes="form-row", id="query-row"):
            yield Select(MODES, value="key", allow_blank=False, id="mode")
            yield Input(placeholder="topic", id="topic")
            yield Input(placeholder="key / unique key / message id / offset", id="value")
            yield Input(placeholder="queue id", id="queue")
            # shown once the cluster has more than one broker: offsets and queues are per broker
            broker = Select([("first broker with the topic", ANY_BROKER)], value=ANY_BROKER, allow_blank=False,
                            id="broker")
            broker.display = False
            yield broker
            yield Button("Search", id="search", variant="primary")
        yield Label("Query a topic, or browse a queue (n / p page through it).", id="query-status")
        yield FilterTable(["Queue", "Offset", "Message id", "Tags", "Keys", "Stored", "Size"], id="results")
        with VerticalScroll(id="message-detail"):
            yield MessageView(id="message")

    def show(self, snapshot: Snapshot, history: History) -> None:
        self.broker_name = snapshot.identity.broker_name
        names = [t.name for t in snapshot.topics]
        topic = self.query_one("#topic", Input)
        topic.suggester = SuggestFromList(names, case_sensitive=True)
        order = [b.name for b in snapshot.brokers]
        self.identities = {b.name: b.identity for b in snapshot.brokers}
        self.topic_brokers = {t.name: sorted({q.broker_name for q in t.queues},
                                             key=lambda n: order.index(n) if n in order else len(order))
                              for t in snapshot.topics}
        if order != self.broker_names:
            self.broker_names = order
            choice = self.query_one("#broker", Select)
            kept = choice.value if choice.value in order else ANY_BROKER
            choice.set_options([("first broker with the topic", ANY_BROKER), *((n, n) for n in order)])
            choice.value = kept
            choice.display = len(order) > 1

    def broker_for(self, topic: str) -> str:
        """The broker a browse or an offset read goes to: the one chosen, else the first broker that has
        the topic (a topic living only on the second broker was read on the first: "0 messages")."""
        chosen = self.query_one("#broker", Select).value
        if isinstance(chosen, str) and chosen != ANY_BROKER:
            return chosen
        having = self.topic_brokers.get(topic)
        return having[0] if having else self.broker_name

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "search":
            self.search()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("topic", "value", "queue"):
            event.stop()
            self.search()
        else:
            super().on_input_submitted(event)

    def _status(self, text: str) -> None:
        """Show ``text`` as it is (it holds user input and error messages: no markup)."""
        self.query_one("#query-status", Label).update(Text(text))

    def search(self, browse_from: int | None = None) -> None:
        mode = self.query_one("#mode", Select).value
        topic = self.query_one("#topic", Input).value.strip()
        value = self.query_one("#value", Input).value.strip()
        queue_text = self.query_one("#queue", Input).value.strip()
        if not topic:
            self._status("Give a topic.")
            return
        try:
            queue_id = int(queue_text) if queue_text else None
            number = int(value) if value and mode in ("offset", "browse") else None
        except ValueError:
            self._status("Queue id and offset are numbers.")
            return
        if number is not None and number < 0:
            self._status(negative_offset(number))
            return
        broker = self.broker_for(topic)
        many = len(self.broker_names) > 1
        on = f" on {broker}" if many else ""
        self._by_time = mode in ("uniq", "id")
        if mode == "browse":
            qid = queue_id or 0
            start = browse_from if browse_from is not None else number
            self._browse_at = start

            def fn(a: Admin) -> Found:
                lo = start if start is not None else 0
                scans = a.consume_message(topic, "rmqops_dashboard", broker, qid, offset=lo, max_num=PAGE)
                return [m for s in scans for m in s.messages], []
            what = f"queue {qid} of {topic}{on} from offset {start if start is not None else 'its start'}"
        else:
            self._browse_at = None
            if not value:
                self._status("Give what to look for.")
                return
            if mode == "offset" and (queue_id is None or number is None):
                self._status("A queue offset needs a queue id and an offset.")
                return
            what = f"{topic} {dict((v, k) for k, v in MODES)[str(mode)]} {value}"
            if mode == "offset":
                what += f" of queue {queue_id}{on}"

            def query(a: Admin) -> list[MessageRecord]:
                if mode == "key":
                    return a.query_msg_by_key(topic, value)
                if mode == "uniq":
                    return a.query_msg_by_unique_key(topic, value)
                return a.query_msg_by_id(topic, value)

            def fn(a: Admin) -> Found:
                if mode == "offset":
                    return [a.query_msg_by_offset(topic, broker, queue_id or 0, number or 0)], []
                return query(a), left_out_of_route(a, topic)
        self._status(f"Reading {what}...")
        self._what = what
        poller = self.dashboard.poller
        if many and mode in ("key", "uniq", "id"):
            read = poller.ask_each_broker(self, "messages", lambda a: routed_brokers(a, topic), query)
        else:  # one broker: a timeout of a browse or an offset read names it (and leaves it out)
            read = poller.ask(self, "messages", fn, on=self.identities.get(broker) if many else None)
        self.run_worker(read, group="messages", exclusive=True)

    def on_poller_answer(self, event: Poller.Answer) -> None:
        if event.tag != "messages":
            return
        event.stop()
        if event.error is not None:
            self.results = []
            self._status(f"{self._what}: {event.error}")
        else:
            records, skipped = event.value
            # asked broker by broker, each broker's are in time order but not all of them together
            self.results = sorted(records, key=lambda r: r.store_timestamp) if self._by_time else list(records)
            page = f" (n / p: next / previous {PAGE})" if self._browse_at is not None or \
                self.query_one("#mode", Select).value == "browse" else ""
            partial = f"; not searched: {', '.join(skipped)} (not answering, left out until it answers)" \
                if skipped else ""
            self._status(f"{self._what}: {len(self.results)} message(s){page}{partial}")
        self.query_one("#results", FilterTable).set_rows([
            (str(i), [r.queue_id, r.queue_offset, r.display_id, r.tags or "", r.keys or "",
                      fmt.when(r.store_timestamp), r.store_size]) for i, r in enumerate(self.results)])
        self.query_one("#message", MessageView).show_record(self.results[0] if self.results else None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "results" and event.row_key.value is not None:
            i = int(event.row_key.value)
            if i < len(self.results):
                self.query_one("#message", MessageView).show_record(self.results[i])

    def action_body_view(self) -> None:
        view = self.query_one("#message", MessageView).cycle_view()
        self.notify(f"Body shown as: {view}", timeout=1.5)

    def action_page(self, step: int) -> None:
        if self.query_one("#mode", Select).value != "browse":
            self.notify("Paging works when browsing a queue", severity="warning")
            return
        if step > 0:
            start = (self.results[-1].queue_offset + 1) if self.results else (self._browse_at or 0)
        else:
            start = max(0, (self.results[0].queue_offset if self.results else (self._browse_at or 0)) - PAGE)
        self.search(browse_from=start)


Found = tuple[list[MessageRecord], list[str]]
"""A read's messages, and the brokers of the topic it could not search (left out: not answering)."""


def routed_brokers(a: Admin, topic: str) -> list[BrokerIdentity]:
    """The master of each broker holding queues in ``topic``'s route (those left out too), as the Admin's
    queries find them; the name server alone is asked. No route is "topic not found", as the query says."""
    route = a.topic_route(topic)
    names = {qd.get("brokerName") for qd in route.get("queueDatas", [])}
    out = []
    for bd in route.get("brokerDatas", []):
        addrs = bd.get("brokerAddrs") or {}
        if bd.get("brokerName") in names and addrs:
            bid = min(addrs, key=int)
            out.append(BrokerIdentity(bd.get("cluster", ""), bd["brokerName"], addrs[bid], int(bid)))
    if not out:
        raise NotFoundError(f"topic [{topic}] not found in {a.target}")
    return out


def left_out_of_route(a: Admin, topic: str) -> list[str]:
    """The brokers of ``topic``'s route that ``a`` leaves out (not answering), as "name (address)".

    Why: a query fans out over the route but those brokers, so its answer may lack their messages; the
    name server alone is asked here (no broker), so this cannot hang on the broker it names."""
    if not a.left_out:
        return []
    try:
        route = a.topic_route(topic)
    except AdminError:
        return []  # no route: the query itself says the topic is not found
    return [f"{bd.get('brokerName', '')} ({addr})" for bd in route.get("brokerDatas", [])
            for addr in (bd.get("brokerAddrs") or {}).values() if addr in a.left_out]


def negative_offset(offset: int) -> str:
    """The refusal of a negative queue offset, in the words the broker's pull answers it with
    (what ``Admin.query_msg_by_offset`` says on a cluster and on a store directory)."""
    return f"queueOffset must be >= 0, got {offset}"
