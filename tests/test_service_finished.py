"""The wake-up of ?wait requests (harness/service/queue/finished.py): a notify from a grading thread wakes the
request waiting for that submission, and only that one; a request that stopped waiting is forgotten."""

from __future__ import annotations

import asyncio
import threading

from harness.service.queue.finished import Finished


def test_a_notify_from_another_thread_wakes_only_the_waiter_of_that_submission():
    finished = Finished()

    async def main():
        with finished.watch("a") as a, finished.watch("b") as b:
            threading.Thread(target=finished.notify, args=("a",)).start()
            await asyncio.wait_for(a.wait(), 5)
            await asyncio.sleep(0.05)
            assert a.is_set() and not b.is_set()
        assert finished._waiters == {}        # both requests stopped waiting: nothing kept for them
        finished.notify("a")                  # a notify nobody waits for is harmless

    asyncio.run(main())
