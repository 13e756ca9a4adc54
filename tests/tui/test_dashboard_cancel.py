"""Quitting the dashboard cancels its refresh loop, and a cancellation must end it whatever moment it
lands. Python 3.11's ``asyncio.wait_for`` lost a cancellation that arrived just as the Admin call it
waited for completed: the call's result was returned, the refresh loop ran on after the app had quit,
and the process (a CI run) never exited."""

from __future__ import annotations

import asyncio

from tui_seed import Store

from tui.poller import AdminSession


def test_a_call_cancelled_just_as_its_answer_lands_ends_cancelled(golden_store) -> None:
    store: Store = golden_store("store-basic")

    async def go() -> tuple[bool, str]:
        loop = asyncio.get_running_loop()
        session = AdminSession(store.target())
        cancel_accepted: list[bool] = []
        task: asyncio.Task[str]

        def answer(admin: object) -> str:
            # The cancel runs three loop turns after this answer is handed to the loop: the turn in which
            # the call's waiter has its result and the task is about to be woken with it.
            loop.call_soon_threadsafe(lambda: loop.call_soon(lambda: loop.call_soon(
                lambda: cancel_accepted.append(task.cancel()))))
            return "answer"

        task = asyncio.ensure_future(session.call(answer, 30.0))
        try:
            outcome = await task
        except asyncio.CancelledError:
            outcome = "cancelled"
        await asyncio.sleep(0.05)  # the scheduled cancel has run, whatever the order
        session.close()
        return cancel_accepted[0], outcome

    accepted, outcome = asyncio.run(go())
    # A cancel the task accepted ends it cancelled; one that came too late finds it finished.
    assert (accepted, outcome) in ((True, "cancelled"), (False, "answer")), (accepted, outcome)
