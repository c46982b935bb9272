"""`grade serve` refuses before it announces (issue 23): a second server on the same data dir, or a port that is
taken, is one `grade: error:` line and exit 2, and no URL is printed that nothing serves."""

from __future__ import annotations

import socket
import subprocess

from harness.core.errors import EXIT_USAGE
from tests.service.support import SERVE, Server, free_port


def _serve(data_dir, port, env) -> subprocess.CompletedProcess:
    return subprocess.run([*SERVE, "--data-dir", str(data_dir), "--port", str(port), "--workers", "1"],
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_second_server_on_the_same_data_dir_is_refused_before_its_url(tmp_path):
    first = Server(tmp_path / "data", workers=1).start()
    try:
        r = _serve(first.data_dir, free_port(), first.env)
    finally:
        first.stop()
    assert r.returncode == EXIT_USAGE, r.stderr
    assert "grade: error: another `grade serve` is using" in r.stderr
    assert "http://" not in r.stderr and "http://" not in r.stdout, r.stderr


def test_a_port_in_use_is_one_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = Server(tmp_path / "data").env
        r = _serve(tmp_path / "data", port, env)
    assert r.returncode == EXIT_USAGE, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[-1] == (f"grade: error: port {port} on 127.0.0.1 is already in use (another server?); stop it "
                         "or choose another port with --port"), r.stderr
    assert "http://" not in r.stderr and "Errno" not in r.stderr and "Traceback" not in r.stderr
    # the lock went with the refusal: the data dir serves at once on a free port
    ok = Server(tmp_path / "data", workers=1).start()
    ok.stop()
    banner = ok.log()
    assert f"grade serve: http://127.0.0.1:{ok.port}/" in banner
    assert "alembic" not in banner                      # a start-up is the banner, not the migration's chatter


def test_the_connections_it_accepts_send_without_waiting_for_acks():
    """The listening socket names IPPROTO_TCP, so asyncio (uvicorn serves on that socket through
    ``loop.create_server(sock=...)``) sets TCP_NODELAY on every connection it accepts: a response's body is sent
    with its headers, not ~40 ms later after the client's delayed ACK (it was, on every answer but the first of a
    kept-alive connection)."""
    import asyncio
    import types

    from harness.service.server import listen

    sock = listen(types.SimpleNamespace(host="127.0.0.1", port=0))

    async def accepted_nodelay() -> int:
        loop = asyncio.get_running_loop()
        seen = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                option = transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                seen.set_result(option)

        server = await loop.create_server(Probe, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0
