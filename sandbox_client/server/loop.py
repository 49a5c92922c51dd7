"""A small event loop for the server: epoll, timers, coroutine tasks and socket streams.

``asyncio`` was four fifths of the server's imports (it brings ``logging``, ``inspect``,
``concurrent.futures`` and ``subprocess``), and the server's start-up is part of every
sandbox's provision time. The server needs little of it: one thread, readiness callbacks,
timers, coroutines waiting on futures, and buffered socket streams with back-pressure. This is
that part, in asyncio's shapes (``Future``, ``Task``, ``Event``, ``Queue``, ``timeout``,
``sleep``, a stream's ``readuntil``/``write``/``drain``), without the rest: one loop per
process (``loop()``), Linux only (epoll), no threads, no executor.

A callback or a task that raises is dropped, not fatal: a bug must not take the sandbox's
server down.
"""

from __future__ import annotations

import heapq
import os
import select
import signal
import socket
import time
from collections import deque

TYPE_CHECKING = False  # ``typing`` costs import time at every sandbox start
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator
    from types import TracebackType
    from typing import Any

READ_CHUNK = 256 * 1024
HIGH_WATER = 64 * 1024
"""``drain`` waits while more than this is buffered for the peer (asyncio's default)..."""
LOW_WATER = 16 * 1024
"""...until at most this is."""
CONNECT_TRIES, CONNECT_RETRY_S = 100, 0.01
"""A Unix socket whose backlog is full refuses a non-blocking connect: tried again for a second."""
_READ_EVENTS = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLERR | select.EPOLLHUP

_PENDING, _DONE, _CANCELLED = 0, 1, 2


class CancelledError(BaseException):
    """The task was cancelled (``timeout`` turns its own into ``TimeoutError``)."""


class IncompleteReadError(EOFError):
    """The stream ended before the bytes asked for; ``partial`` holds what came."""

    def __init__(self, partial: bytes) -> None:
        super().__init__(f"{len(partial)} bytes read before the end of the stream")
        self.partial = partial


class LimitOverrunError(Exception):
    """``readuntil`` found no separator within the stream's limit."""


class TimerHandle:
    """A callback due at ``when`` (``Loop.time``); ``cancel`` stops it."""

    __slots__ = ("args", "callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (idempotent)."""
        self.cancelled = True

    def __lt__(self, other: TimerHandle) -> bool:
        return self.when < other.when


class Future:
    """A result to come: awaited by tasks, resolved by callbacks."""

    __slots__ = ("_callbacks", "_exception", "_loop", "_result", "_state")

    def __init__(self, loop: Loop) -> None:
        self._loop = loop
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Future], object]] = []

    def done(self) -> bool:
        """Whether it has a result, an exception, or was cancelled."""
        return self._state != _PENDING

    def cancelled(self) -> bool:
        """Whether it was cancelled."""
        return self._state == _CANCELLED

    def result(self) -> Any:
        """The result.

        Raises:
            CancelledError: it was cancelled.
            RuntimeError: it is not done.
            BaseException: the exception it was given.
        """
        if self._state == _CANCELLED:
            raise CancelledError
        if self._state == _PENDING:
            raise RuntimeError("the result is not ready")
        if self._exception is not None:
            raise self._exception
        return self._result

    def set_result(self, value: Any) -> None:
        """Resolve it with ``value`` (ignored when already done)."""
        if self._state == _PENDING:
            self._result = value
            self._finish(_DONE)

    def set_exception(self, exc: BaseException) -> None:
        """Resolve it with ``exc`` (ignored when already done)."""
        if self._state == _PENDING:
            self._exception = exc
            self._finish(_DONE)

    def cancel(self) -> bool:
        """Cancel it; False when it was already done."""
        if self._state != _PENDING:
            return False
        self._finish(_CANCELLED)
        return True

    def add_done_callback(self, callback: Callable[[Future], object]) -> None:
        """Call ``callback(self)`` once done (soon, from the loop)."""
        if self._state == _PENDING:
            self._callbacks.append(callback)
        else:
            self._loop.call_soon(callback, self)

    def _finish(self, state: int) -> None:
        self._state = state
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._loop.call_soon(callback, self)

    def __await__(self) -> Generator[Future, None, Any]:
        if self._state == _PENDING:
            yield self
        return self.result()


class Task(Future):
    """Runs a coroutine on the loop; done when the coroutine returns or raises."""

    __slots__ = ("_coro", "_must_cancel", "_waiting")

    def __init__(self, loop: Loop, coro: Coroutine[Any, Any, Any]) -> None:
        super().__init__(loop)
        self._coro = coro
        self._waiting: Future | None = None
        self._must_cancel = False
        loop.call_soon(self._step, None)

    def cancel(self) -> bool:
        """Throw ``CancelledError`` into the coroutine where it waits; False when done."""
        if self.done():
            return False
        waiting = self._waiting
        if waiting is None or not waiting.cancel():
            self._must_cancel = True  # thrown at its next step
        return True

    def _step(self, exc: BaseException | None) -> None:
        if self.done():
            return
        if self._must_cancel:
            self._must_cancel = False
            exc = CancelledError()
        self._waiting = None
        previous, self._loop.current_task = self._loop.current_task, self
        try:
            yielded = self._coro.send(None) if exc is None else self._coro.throw(exc)
        except StopIteration as stop:
            self.set_result(stop.value)
        except CancelledError:
            Future.cancel(self)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:
            self.set_exception(error)
        else:
            if isinstance(yielded, Future):
                self._waiting = yielded
                yielded.add_done_callback(self._wake)
            else:  # a bare ``yield``: run again soon
                self._loop.call_soon(self._step, None)
        finally:
            self._loop.current_task = previous

    def _wake(self, future: Future) -> None:
        if future is not self._waiting:
            return
        try:
            future.result()
        except BaseException as exc:
            self._step(exc)
        else:
            self._step(None)


class Loop:
    """The process's event loop (see the module docstring)."""

    def __init__(self) -> None:
        self._ready: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._timers: list[TimerHandle] = []
        self._epoll = select.epoll()
        self._readers: dict[int, Callable[[], object]] = {}
        self._writers: dict[int, Callable[[], object]] = {}
        self._registered: dict[int, int] = {}
        self._signals: dict[int, Callable[[], object]] = {}
        self._wakeup: tuple[int, int] | None = None
        self.current_task: Task | None = None

    def time(self) -> float:
        """The loop's clock, in seconds (monotonic)."""
        return time.monotonic()

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """Run ``callback(*args)`` at the next turn."""
        self._ready.append((callback, args))

    def call_later(
        self, delay_s: float, callback: Callable[..., object], *args: Any
    ) -> TimerHandle:
        """Run ``callback(*args)`` after ``delay_s``."""
        handle = TimerHandle(self.time() + max(0.0, delay_s), callback, args)
        heapq.heappush(self._timers, handle)
        return handle

    def create_future(self) -> Future:
        """A pending future of this loop."""
        return Future(self)

    def create_task(self, coro: Coroutine[Any, Any, Any]) -> Task:
        """Run ``coro`` as a task, starting at the next turn."""
        return Task(self, coro)

    # readiness ------------------------------------------------------------------------

    def add_reader(self, fd: int, callback: Callable[[], object]) -> None:
        """Call ``callback()`` whenever ``fd`` is readable (or at its end or error)."""
        self._readers[fd] = callback
        self._update(fd)

    def remove_reader(self, fd: int) -> None:
        """Stop watching ``fd`` for reading (idempotent)."""
        if self._readers.pop(fd, None) is not None:
            self._update(fd)

    def add_writer(self, fd: int, callback: Callable[[], object]) -> None:
        """Call ``callback()`` whenever ``fd`` is writable (or at an error)."""
        self._writers[fd] = callback
        self._update(fd)

    def remove_writer(self, fd: int) -> None:
        """Stop watching ``fd`` for writing (idempotent)."""
        if self._writers.pop(fd, None) is not None:
            self._update(fd)

    def _update(self, fd: int) -> None:
        mask = (select.EPOLLIN if fd in self._readers else 0) | (
            select.EPOLLOUT if fd in self._writers else 0
        )
        before = self._registered.get(fd)
        try:
            if not mask:
                self._registered.pop(fd, None)
                if before is not None:
                    self._epoll.unregister(fd)
            elif before is None:
                self._epoll.register(fd, mask)
                self._registered[fd] = mask
            elif before != mask:
                self._epoll.modify(fd, mask)
                self._registered[fd] = mask
        except OSError:  # closed meanwhile: the kernel dropped it already
            self._registered.pop(fd, None)

    async def wait_readable(self, fd: int) -> None:
        """Return once ``fd`` is readable (or at its end)."""
        await self._wait(fd, self.add_reader, self.remove_reader)

    async def wait_writable(self, fd: int) -> None:
        """Return once ``fd`` is writable (or broken)."""
        await self._wait(fd, self.add_writer, self.remove_writer)

    async def _wait(
        self,
        fd: int,
        add: Callable[[int, Callable[[], object]], None],
        remove: Callable[[int], None],
    ) -> None:
        ready = self.create_future()
        add(fd, lambda: ready.set_result(None))
        try:
            await ready
        finally:
            remove(fd)

    # signals --------------------------------------------------------------------------

    def add_signal_handler(self, signum: int, callback: Callable[[], object]) -> None:
        """Call ``callback()`` from the loop when ``signum`` arrives."""
        if self._wakeup is None:
            read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
            self._wakeup = (read_end, write_end)
            self.add_reader(read_end, self._drain_wakeup)
        self._signals[signum] = callback
        signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        callback = self._signals.get(signum)
        if callback is not None:
            self.call_soon(callback)

    def _drain_wakeup(self) -> None:
        assert self._wakeup is not None
        try:
            while os.read(self._wakeup[0], 4096):
                pass
        except BlockingIOError:
            pass

    # running --------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` to its end (other tasks run meanwhile) and return its result."""
        main = self.create_task(coro)
        while not main.done():
            self._run_once()
        return main.result()

    def _run_once(self) -> None:
        timeout = -1.0
        if self._ready:
            timeout = 0.0
        elif self._timers:
            timeout = max(0.0, self._timers[0].when - self.time())
        for fd, events in self._epoll.poll(timeout):
            if events & _READ_EVENTS and fd in self._readers:
                self._ready.append((self._readers[fd], ()))
            if events & _WRITE_EVENTS and fd in self._writers:
                self._ready.append((self._writers[fd], ()))
        now = self.time()
        while self._timers and self._timers[0].when <= now:
            handle = heapq.heappop(self._timers)
            if not handle.cancelled:
                self._ready.append((handle.callback, handle.args))
        for _ in range(len(self._ready)):
            callback, args = self._ready.popleft()
            try:
                callback(*args)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # a bug in one callback must not end the server
                pass


_loop: Loop | None = None


def loop() -> Loop:
    """The process's loop (made on first use)."""
    global _loop
    if _loop is None:
        _loop = Loop()
    return _loop


def create_task(coro: Coroutine[Any, Any, Any]) -> Task:
    """``loop().create_task(coro)``."""
    return loop().create_task(coro)


async def sleep(delay_s: float) -> None:
    """Return after ``delay_s``."""
    the_loop = loop()
    woken = the_loop.create_future()
    handle = the_loop.call_later(delay_s, woken.set_result, None)
    try:
        await woken
    finally:
        handle.cancel()


class timeout:  # noqa: N801 - named as asyncio's
    """``async with timeout(s):`` cancels the block after ``s`` seconds (None: never) and
    raises ``TimeoutError`` in its place."""

    def __init__(self, delay_s: float | None) -> None:
        self._delay_s = delay_s
        self._task: Task | None = None
        self._handle: TimerHandle | None = None
        self._expired = False

    async def __aenter__(self) -> timeout:
        self._task = loop().current_task
        if self._delay_s is not None and self._task is not None:
            self._handle = loop().call_later(self._delay_s, self._expire)
        return self

    def _expire(self) -> None:
        self._expired = True
        if self._task is not None:
            self._task.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        if self._expired and exc_type is CancelledError:
            raise TimeoutError
        return False


class Event:
    """A flag tasks can wait for."""

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[Future] = []

    def is_set(self) -> bool:
        """Whether ``set`` was called."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        if not self._set:
            self._set = True
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                waiter.set_result(None)

    async def wait(self) -> None:
        """Return once the flag is set."""
        if self._set:
            return
        waiter = loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)


class Queue:
    """An unbounded first-in first-out queue with one kind of reader: ``get``."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._getter: Future | None = None

    def put_nowait(self, item: Any) -> None:
        """Add ``item`` and wake a waiting ``get``."""
        self._items.append(item)
        if self._getter is not None:
            self._getter.set_result(None)

    async def get(self) -> Any:
        """The oldest item, once there is one."""
        while not self._items:
            self._getter = loop().create_future()
            try:
                await self._getter
            finally:
                self._getter = None
        return self._items.popleft()

    def qsize(self) -> int:
        """How many items wait."""
        return len(self._items)


class Stream:
    """A connected non-blocking socket with buffers both ways (asyncio's ``StreamReader``
    and ``StreamWriter`` in one): ``readuntil``, ``readexactly``, ``read``; ``write``,
    ``drain``, ``close``. Reading or draining a broken connection raises ``ConnectionError``.
    """

    def __init__(self, sock: socket.socket, limit: int) -> None:
        sock.setblocking(False)
        self.socket = sock
        self._fd = sock.fileno()
        self._loop = loop()
        self._limit = limit
        self._buffer = bytearray()
        self._eof = False
        self._out: deque[memoryview] = deque()
        self._out_bytes = 0
        self._error: OSError | None = None
        self._drained: Future | None = None
        self._closing = False
        self._closed = self._loop.create_future()

    # reading --------------------------------------------------------------------------

    async def _fill(self) -> None:
        """Read what arrives next into the buffer (sets ``_eof`` at the end)."""
        while True:
            try:
                data = self.socket.recv(READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                await self._loop.wait_readable(self._fd)
                continue
            if data:
                self._buffer += data
            else:
                self._eof = True
            return

    async def readuntil(self, separator: bytes) -> bytes:
        """The bytes up to and including ``separator``.

        Raises:
            IncompleteReadError: the stream ended first.
            LimitOverrunError: no separator within the stream's limit.
        """
        start = 0
        while True:
            found = self._buffer.find(separator, start)
            if found >= 0:
                return self._take(found + len(separator))
            if len(self._buffer) > self._limit:
                raise LimitOverrunError("separator not found within the limit")
            if self._eof:
                partial = bytes(self._buffer)
                self._buffer.clear()
                raise IncompleteReadError(partial)
            start = max(0, len(self._buffer) - len(separator) + 1)
            await self._fill()

    async def readexactly(self, count: int) -> bytes:
        """Exactly ``count`` bytes.

        Raises:
            IncompleteReadError: the stream ended first.
        """
        while len(self._buffer) < count:
            if self._eof:
                partial = bytes(self._buffer)
                self._buffer.clear()
                raise IncompleteReadError(partial)
            await self._fill()
        return self._take(count)

    def _take(self, count: int) -> bytes:
        with memoryview(self._buffer) as view:  # one copy, not two
            data = bytes(view[:count])
        del self._buffer[:count]
        return data

    async def read(self, count: int) -> bytes:
        """Up to ``count`` bytes, once some are there (b"" at the end)."""
        if not self._buffer and not self._eof:
            await self._fill()
        return self._take(count)

    # writing --------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send ``data`` now as far as the socket takes it and buffer the rest (dropped
        once the connection broke: ``drain`` says so)."""
        if not data or self._error is not None or self._closed.done():
            return
        if not self._out:
            try:
                sent = self.socket.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._broken(exc)
                return
            if sent == len(data):
                return
            self._loop.add_writer(self._fd, self._flush)
            data = data[sent:]
        self._out.append(memoryview(data))
        self._out_bytes += len(data)

    def _flush(self) -> None:
        while self._out:
            chunk = self._out[0]
            try:
                sent = self.socket.send(chunk)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._broken(exc)
                return
            self._out_bytes -= sent
            if sent < len(chunk):
                self._out[0] = chunk[sent:]
                break
            self._out.popleft()
        if not self._out:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._close_now()
        if self._out_bytes <= LOW_WATER and self._drained is not None:
            self._drained.set_result(None)

    def _broken(self, exc: OSError) -> None:
        self._error = exc
        self._out.clear()
        self._out_bytes = 0
        self._loop.remove_writer(self._fd)
        if self._drained is not None:
            self._drained.set_result(None)
        if self._closing:
            self._close_now()

    async def drain(self) -> None:
        """Wait while too much is buffered for the peer.

        Raises:
            ConnectionResetError: the connection broke.
        """
        if self._error is None and self._out_bytes > HIGH_WATER:
            self._drained = self._loop.create_future()
            try:
                await self._drained
            finally:
                self._drained = None
        if self._error is not None:
            raise ConnectionResetError(str(self._error))

    def close(self) -> None:
        """Close once what is buffered has been sent (idempotent)."""
        self._closing = True
        if not self._out:
            self._close_now()

    def _close_now(self) -> None:
        if self._closed.done():
            return
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self.socket.close()
        self._closed.set_result(None)

    async def wait_closed(self) -> None:
        """Return once the socket is closed."""
        await self._closed


class Server:
    """A listening socket whose connections each run ``handler(stream)`` as a task."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Callable[[Stream], Coroutine[Any, Any, None]],
        limit: int,
    ) -> None:
        sock.setblocking(False)
        self.sockets = [sock]
        self._handler = handler
        self._limit = limit
        self._loop = loop()
        self._loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        listening = self.sockets[0]
        for _ in range(64):
            try:
                conn, _ = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, say: try again a little later
                self._loop.remove_reader(listening.fileno())
                self._loop.call_later(0.1, self._resume)
                return
            self._loop.create_task(self._handler(Stream(conn, self._limit)))

    def _resume(self) -> None:
        if self.sockets[0].fileno() >= 0:
            self._loop.add_reader(self.sockets[0].fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting and close the listening socket."""
        listening = self.sockets[0]
        if listening.fileno() >= 0:
            self._loop.remove_reader(listening.fileno())
            listening.close()


def listen(
    sock: socket.socket,
    handler: Callable[[Stream], Coroutine[Any, Any, None]],
    *,
    backlog: int,
    limit: int,
) -> Server:
    """Listen on the bound ``sock`` and serve each connection with ``handler``."""
    sock.listen(backlog)
    return Server(sock, handler, limit)


async def open_unix_connection(path: str, limit: int) -> Stream:
    """A stream connected to the Unix socket at ``path``.

    Raises:
        OSError: it cannot be reached.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        for _ in range(CONNECT_TRIES):
            try:
                sock.connect(path)
                return Stream(sock, limit)
            except (BlockingIOError, InterruptedError):  # its backlog is full: try again
                await sleep(CONNECT_RETRY_S)
        raise ConnectionRefusedError(f"{path}: no room in its backlog")
    except BaseException:
        sock.close()
        raise
