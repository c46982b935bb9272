"""Building and running the server: open the store (migrations), take the data-dir lock (embedded mode:
one server per SQLite store), wire the pool, the webhooks and the app, run uvicorn."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket

from harness.service.settings import Settings


class DataDirLocked(RuntimeError):
    pass


class CannotListen(RuntimeError):
    """The address is taken (another server on the port) or not ours to listen on."""


def lock_data_dir(settings: Settings):
    """An exclusive lock on <data-dir>/serve.lock, held for the life of the process (released by the kernel
    on any exit, kill -9 included)."""
    settings.ensure_data_dir()
    fd = os.open(settings.data_dir / "serve.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirLocked(f"another `grade serve` is using {settings.data_dir}") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def open_store(settings: Settings):
    from harness.service.store import Store

    if settings.is_sqlite:
        settings.ensure_data_dir()
    store = Store(settings.database_url)
    store.migrate()
    return store


def build(settings: Settings):
    from harness.service.app import create_app
    from harness.service.keys import KEY_FILE_ENV, SECRET_KEY_ENV, key_file
    from harness.service.metrics import Metrics
    from harness.service.queue.engine import QueueEngine
    from harness.service.webhooks import WebhookSender

    store = open_store(settings)
    if not settings.is_sqlite and not (os.environ.get(SECRET_KEY_ENV) or os.environ.get(KEY_FILE_ENV)):
        logging.getLogger("grader.keys").warning(
            "a shared store without %s or %s: this server signs with its own key file %s; give every server "
            "of the store the same key", SECRET_KEY_ENV, KEY_FILE_ENV, key_file(settings.data_dir))
    metrics = Metrics()
    pool = QueueEngine(store, settings, metrics, embedded=settings.is_sqlite)
    hooks = WebhookSender(store, settings, metrics)
    return create_app(settings, store, pool, metrics=metrics, webhooks=hooks), store


def listen(settings: Settings) -> socket.socket:
    """The listening socket, bound before anything is announced, so a taken port is one clear error. Made with
    ``IPPROTO_TCP`` named: the connections it accepts inherit the protocol number, and asyncio sets TCP_NODELAY
    only on sockets that name it. Without it, a response's body waited for the client's delayed ACK of its
    headers (~40 ms on every answer but the first of a kept-alive connection)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CannotListen(f"port {settings.port} on {settings.host} is already in use (another server?); "
                               "stop it or choose another port with --port") from None
        raise CannotListen(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, *, log_level: str = "info", announce=None) -> None:
    """Take the data dir's lock and the port, then ``announce()`` (the URL), then serve until stopped. Either
    refusal (DataDirLocked, CannotListen) comes before any announcement."""
    import uvicorn

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fd = lock_data_dir(settings)   # one server per data dir (and so per SQLite store, or per owner id)
    try:
        sock = listen(settings)
    except CannotListen:
        os.close(fd)
        raise
    if log_level != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)   # the migration's plugin chatter is not news
    app, store = build(settings)
    if announce is not None:
        announce(store, sock.getsockname()[1])   # the port bound (--port 0 picks a free one)
    try:
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level, access_log=False,
                                proxy_headers=False, server_header=False, timeout_graceful_shutdown=10)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        store.dispose()
        if fd is not None:
            os.close(fd)
