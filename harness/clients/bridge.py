"""Blocking use of our asyncio producer from threads and from gevent greenlets (locust).

One event loop per process runs on its own OS thread (:class:`LoopThread`); callers submit
coroutines to it and wait. Under gevent's monkey-patching the loop thread must be a real
thread with a real selector (gevent's would park it on a hub that nobody runs), and a
greenlet waits on a gevent ``AsyncResult`` woken from the loop thread, so other greenlets
keep running while it waits.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .errors import RetriableError

T = TypeVar("T")


def _gevent_patched() -> bool:
    try:
        from gevent import monkey
    except ImportError:
        return False
    return bool(monkey.is_module_patched("socket"))


class LoopThread:
    """An asyncio loop on a dedicated OS thread."""

    _shared: LoopThread | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.gevent = _gevent_patched()
        if self.gevent:
            from gevent import monkey

            selector = monkey.get_original("selectors", "DefaultSelector")()
            self.loop: asyncio.AbstractEventLoop = asyncio.SelectorEventLoop(selector)
            start = monkey.get_original("_thread", "start_new_thread")
            start(self._run, ())
        else:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self._run, name="txnchaos-producer-loop", daemon=True).start()

    @classmethod
    def shared(cls) -> LoopThread:
        """The process's loop (started on first use)."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared.loop.is_closed():
                cls._shared = cls()
            return cls._shared

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        atexit.register(self.stop)
        self.loop.run_forever()

    def stop(self) -> None:
        """Stop the loop (at interpreter exit: a loop still running then logs from a dying
        thread)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the loop thread and return its result."""

        async def run() -> T:
            return fn()

        return self.run(run(), None)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        """Run ``coro`` on the loop and wait for it (RetriableError after ``timeout_s``)."""
        fut = self.submit(coro)
        return self.wait(fut, timeout_s)

    def wait(self, fut: concurrent.futures.Future[T], timeout_s: float | None) -> T:
        if not self.gevent:
            try:
                return fut.result(timeout_s)
            except concurrent.futures.TimeoutError:
                fut.cancel()
                raise RetriableError("no answer from the producer loop in time") from None
        import gevent
        from gevent.event import AsyncResult

        result: AsyncResult = AsyncResult()
        hub = gevent.get_hub()

        def settle(value: Any, exc: BaseException | None) -> None:
            if exc is not None:
                result.set_exception(exc)
            else:
                result.set(value)

        def done(f: concurrent.futures.Future[T]) -> None:
            # Read the future here, on the loop's real thread: its lock is a (patched)
            # threading lock, which a hub callback must never wait for.
            if f.cancelled():
                hub.loop.run_callback_threadsafe(settle, None, RetriableError("cancelled"))
                return
            exc = f.exception()
            hub.loop.run_callback_threadsafe(settle, None if exc else f.result(), exc)

        fut.add_done_callback(done)
        try:
            return result.get(timeout=timeout_s)
        except gevent.Timeout:
            fut.cancel()
            raise RetriableError("no answer from the producer loop in time") from None
