"""Parallel execution: long-lived threads, each driving one worker's server."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from core.sandbox.limits import SandboxLimits
from core.sandbox.result import ExecutionResult
from core.sandbox.worker import Profile, Worker

_STOP = None


class WorkerPool:
    """A queue of jobs served by ``size`` threads, each owning one Worker for its lifetime.

    Threads, not processes, because the work happens in the servers: a thread only ships a
    job and waits for the reply, with the GIL released. Each thread starts its server
    eagerly (``warm``), so the first runs do not pay for the interpreter start.
    """

    def __init__(self, make_worker: Callable[[], Worker], size: int, warm: Profile) -> None:
        self._make_worker = make_worker
        self._warm = warm
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self.grow(size)

    @property
    def size(self) -> int:
        return len(self._threads)

    def grow(self, size: int) -> None:
        """Add threads (and servers) until there are ``size``."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox is closed")
            while len(self._threads) < size:
                worker = self._make_worker()
                thread = threading.Thread(
                    target=self._serve, args=(worker,), name="sandbox-worker", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def submit(self, job: dict, limits: SandboxLimits) -> Future:
        future: Future = Future()
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        self._jobs.put((job, limits, future))
        return future

    def map(self, jobs: Sequence[dict], limits: SandboxLimits, concurrency: int) -> list[ExecutionResult]:
        """Run ``jobs`` with at most ``concurrency`` in flight; results in job order."""
        self.grow(concurrency)
        slots = threading.BoundedSemaphore(concurrency)
        futures = []
        for job in jobs:
            slots.acquire()
            future = self.submit(job, limits)
            future.add_done_callback(lambda _: slots.release())
            futures.append(future)
        return [future.result() for future in futures]

    def close(self) -> None:
        """Cancel queued jobs, let runs in flight finish (each within its timeout), stop every server."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(queue.Empty):
            while True:
                self._jobs.get_nowait()[2].cancel()
        for _ in self._threads:
            self._jobs.put(_STOP)
        for thread in self._threads:
            thread.join()

    def _serve(self, worker: Worker) -> None:
        try:
            with contextlib.suppress(Exception):  # reported by the first job, when execute() retries
                worker.start(self._warm)
            while (item := self._jobs.get()) is not _STOP:
                job, limits, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(worker.execute(job, limits))
                except BaseException as exc:
                    future.set_exception(exc)
        finally:
            worker.close()
