"""Regenerate the README's dashboard screenshots (docs/dashboard/*.png): ``make screenshots``.

Screens 1-3, 5 and 6 watch a copy of the golden store-basic (seeded with consumer groups and an
ACL) while a broker process beside it produces to LiveTopic and a slow consumer falls behind;
screen 4 shows store-timer at the moment its timers were written. SVGs come from the app's own
screenshot and are converted with Debian's rsvg-convert (librsvg2-bin), which keeps the columns,
and shrunk with pngquant when it is installed (Debian's pngquant).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(REPO)]

from textual.widgets import Input  # noqa: E402
from tui_seed import make_store, seed_acl, seed_consumers  # noqa: E402

from mqadmin.commands.dashboard import StoreTarget  # noqa: E402
from tui.app import DashboardApp  # noqa: E402

OUT = REPO / "docs" / "dashboard"
SIZE = (118, 34)
ZOOM = "0.75"


async def shoot(app: DashboardApp, name: str, pilot) -> None:  # noqa: ANN001
    await pilot.pause(0.3)
    svg = OUT / f"{name}.svg"
    app.save_screenshot(str(svg))
    png = OUT / f"{name}.png"
    subprocess.run(["rsvg-convert", "-z", ZOOM, str(svg), "-o", str(png)], check=True)
    svg.unlink()
    if shutil.which("pngquant"):  # a terminal has few colours: a palette PNG is a third of the size
        subprocess.run(["pngquant", "--quality=70-95", "--speed", "1", "--force", "--output", str(png), str(png)],
                       check=True)
    print(f"wrote {OUT / (name + '.png')}")


async def wait_answer(pilot, selector: str, marker: str) -> None:  # noqa: ANN001
    from tui_helpers import text_of

    for _ in range(400):
        if marker in text_of(pilot.app, selector):
            return
        await pilot.pause(0.05)
    raise SystemExit(f"no answer in {selector}")


async def live_screens(store_dir: Path, conf: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    broker = subprocess.Popen([sys.executable, str(HERE / "live_broker.py"), str(store_dir), str(conf), "LiveTopic",
                               "live_group", "30", "40", "8", "80"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        broker.stdout.readline()
        app = DashboardApp(StoreTarget(store_dir, conf, description="store ./store"), refresh_s=0.5,
                           call_timeout_s=30)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(6)
            await shoot(app, "1-overview", pilot)
            await pilot.press("2")
            await shoot(app, "2-topics", pilot)
            await pilot.press("3")
            await pilot.pause(1)
            await shoot(app, "3-consumers", pilot)
            await pilot.press("5")
            screen = app.screen
            screen.query_one("#topic", Input).value = "GoldenTopicA"
            screen.query_one("#value", Input).value = "key-0"
            await pilot.click("#search")
            await wait_answer(pilot, "#query-status", "message(s)")
            screen.query_one("#results").focus()
            await shoot(app, "5-messages", pilot)
            await pilot.press("6")
            screen = app.screen
            for field, value in (("subject", "User:alice"), ("resource", "Topic:GoldenTopicB"), ("actions", "Pub"),
                                 ("ip", "10.1.2.3")):
                screen.query_one(f"#explain-{field}", Input).value = value
            await pilot.click("#explain")
            await wait_answer(pilot, "#explanation", "Decision")
            await shoot(app, "6-acl", pilot)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(timeout=30)
        print("live broker stopped", flush=True)


async def timer_screen(root: Path) -> None:
    store = make_store("store-timer", root)
    app = store.app()
    app.sub_title = "store ./store-timer"
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(1200):
            if app.snapshot is not None:
                break
            await pilot.pause(0.05)
        else:
            raise SystemExit(f"store-timer: no refresh in 60 s (lost: {app.lost})")
        await pilot.press("4")
        await shoot(app, "4-timers", pilot)


def main() -> None:
    if shutil.which("rsvg-convert") is None:
        raise SystemExit("rsvg-convert is missing: apt-get install librsvg2-bin")
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = make_store("store-basic", root)
        seed_consumers(store)
        seed_acl(store)
        with store.conf.open("a", encoding="utf-8") as f:
            f.write("flushConsumerOffsetInterval=500\n")
        asyncio.run(live_screens(store.dir, store.conf))
        print("live screens done", flush=True)
        asyncio.run(timer_screen(root))


if __name__ == "__main__":
    main()
