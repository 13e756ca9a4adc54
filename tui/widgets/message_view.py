"""One message: its record fields and properties, and the body as text, pretty JSON or hex.

Every field, property and body is shown as literal text (``rich.text.Text``): they are whatever a
producer sent, and a property value such as ``[/]`` read as markup would stop the dashboard.
"""

from __future__ import annotations

import json

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual.widgets import Static

from mqadmin.admin import MessageRecord
from tui import format as fmt

BODY_VIEWS = ("auto", "text", "json", "hex")
HEX_LIMIT = 4096


def render_body(body: bytes, view: str) -> tuple[str, RenderableType]:
    """(the view actually used, renderable). 'auto' picks JSON, else UTF-8 text, else hex."""
    text: str | None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if view in ("auto", "json") and text is not None:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = None
        if pretty is not None:
            return "json", Syntax(pretty, "json", theme="ansi_dark", word_wrap=True)
        if view == "json":
            return "json", Text("the body is not JSON", style="italic")
    if view in ("auto", "text") and text is not None:
        return "text", Text(text)
    return "hex", Text(hexdump(body[:HEX_LIMIT]) + (f"\n... {len(body) - HEX_LIMIT} more bytes"
                                                    if len(body) > HEX_LIMIT else ""))


def hexdump(data: bytes) -> str:
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i:i + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {hexes:<47}  {ascii_}")
    return "\n".join(lines)


class MessageView(Static):
    """Shows one MessageRecord; ``cycle_view`` steps auto -> text -> json -> hex."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("Select a message to see its properties and body.", **kwargs)  # type: ignore[arg-type]
        self.record: MessageRecord | None = None
        self.view = "auto"

    def show_record(self, record: MessageRecord | None) -> None:
        self.record = record
        self._show_current()

    def cycle_view(self) -> str:
        self.view = BODY_VIEWS[(BODY_VIEWS.index(self.view) + 1) % len(BODY_VIEWS)]
        self._show_current()
        return self.view

    def _show_current(self) -> None:
        r = self.record
        if r is None:
            self.update("Select a message to see its properties and body.")
            return
        from rich.console import Group
        from rich.table import Table

        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold")
        head.add_column()
        for k, v in (("Message id", r.display_id), ("Offset message id", r.msg_id),
                     ("Topic / queue / offset", f"{r.topic} / {r.queue_id} / {r.queue_offset}"),
                     ("Commitlog offset", str(r.commit_log_offset)), ("Stored", fmt.when(r.store_timestamp)),
                     ("Born", f"{fmt.when(r.born_timestamp)} from {r.born_host}"),
                     ("Reconsume times", str(r.reconsume_times))):
            head.add_row(Text(k), Text(v))
        props = Table("Property", "Value", box=None, pad_edge=False)
        for k, v in sorted(r.properties.items()):
            props.add_row(Text(k), Text(v))
        used, body = render_body(r.body, self.view)
        title = Text(f"Body ({len(r.body)} bytes, {used}; b switches view)", style="bold")
        self.update(Group(head, Text(""), props, Text(""), title, body))
