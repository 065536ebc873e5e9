"""A thread that runs jobs for the event loop, in order: the spawner threads and each sandbox's thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

_Woken = tuple[trio.lowlevel.TrioToken, trio.lowlevel.Task]


class Worker:
    """A thread that runs jobs for the loop, in order; cheaper per job than trio.to_thread (no
    limiter, no context copy: a queue put, and one wake-up back). `setup` runs first on the
    thread; when it fails every job fails with its error, so nothing runs without it.

    Jobs queued meanwhile run in a row and their tasks are woken by one `run_sync_soon`: woken
    one by one, each woke the loop and handed the GIL back and forth (bench/README.md)."""

    def __init__(self, name: str, setup: Callable[[], None] | None = None) -> None:
        self.jobs: queue.SimpleQueue[Callable[[BaseException | None], _Woken] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(setup,), name=name, daemon=True).start()

    def _serve(self, setup: Callable[[], None] | None) -> None:
        failure: BaseException | None = None
        try:
            if setup is not None:
                setup()
        except OSError as exc:
            failure = exc
        stopping = False
        while not stopping:
            jobs = [self.jobs.get()]
            while not self.jobs.empty():
                jobs.append(self.jobs.get())
            woken: dict[trio.lowlevel.TrioToken, list[trio.lowlevel.Task]] = {}
            for job in jobs:
                if job is None:
                    stopping = True
                else:
                    token, task = job(failure)
                    woken.setdefault(token, []).append(task)
            for token, tasks in woken.items():
                token.run_sync_soon(reschedule_all, tasks)

    def stop(self) -> None:
        self.jobs.put(None)

    async def run(self, fn: Callable[[], Any]) -> Any:
        """fn() on the thread. Not cancellable once queued, so what fn did (a spawn) is never lost."""
        task, token = trio.lowlevel.current_task(), trio.lowlevel.current_trio_token()
        outcome: list[Any] = []

        def job(failure: BaseException | None) -> _Woken:
            try:
                if failure is not None:
                    raise failure
                outcome.append(fn())
            except BaseException as exc:                # delivered to the awaiting task
                outcome.append(exc)
            return token, task

        self.jobs.put(job)
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]


def reschedule_all(tasks: list[trio.lowlevel.Task]) -> None:
    """The loop's side of a finished burst: every task whose job is done is woken in one go (the
    worker asks the loop once per burst, not once per job)."""
    for task in tasks:
        trio.lowlevel.reschedule(task)
