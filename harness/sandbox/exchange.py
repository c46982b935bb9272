"""The host's side of a worker's *input exchange*: argument memory the host writes and reads back itself.

The mutation check must not rest on the worker's word (a submission can rewrite the worker in its own process
and send back whatever "arguments after the call" it likes). So for the calls whose inputs are checked, the host
writes the argument arrays into one file per worker — a memfd for the local backend (its descriptor is passed
down), a file on a tmpfs bind-mounted at ``/exchange`` for Docker — the worker maps it ``MAP_SHARED`` and hands
the candidate views of that mapping (NumPy arrays with the requested layout, built in place; torch tensors
``from_numpy`` over them), and after the result frame the host reads the bytes back with ``pread`` and compares
them with what it wrote. A mutation undone before the call returned is no mutation.

Layout of the file: page 0 holds the boot handshake (16 random bytes from the host; the worker writes their
complement beside them before its ``boot`` frame, before any of the candidate's code has run, which proves the
mapping is coherent between the two sides — gVisor included); arguments follow, each at a page boundary. The
host only ever uses ``pread``/``pwrite``/``ftruncate`` on its own descriptor, never ``mmap``: whatever the worker
does to the file (truncate it, say) cannot fault the grader. The file only grows, so a view the candidate kept
from an earlier call can alias later inputs but never faults.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from typing import TYPE_CHECKING

from harness.core.leftovers import scratch_prefix

if TYPE_CHECKING:
    import numpy as np

PAGE = max(4096, mmap.ALLOCATIONGRANULARITY)  # the worker maps each argument at a multiple of it
NONCE = 16


def _align(n: int) -> int:
    return (n + PAGE - 1) // PAGE * PAGE


class Exchange:
    """One worker's exchange file, open read-write on the host."""

    def __init__(self, fd: int, path: str | None = None):
        self.fd, self.path = fd, path
        self.nonce = os.urandom(NONCE)  # what secrets.token_bytes is, without its import (hmac, OpenSSL)
        self.verified: bool | None = None   # None until the worker's boot frame; then whether the handshake held
        self.reason = "the worker has not booted"
        os.ftruncate(fd, PAGE)
        os.pwrite(fd, self.nonce, 0)

    # -- creation --------------------------------------------------------------------------------------------
    @staticmethod
    def optional(make) -> "Exchange | None":
        """``make()`` (:meth:`memfd` or :meth:`file`), or None where no exchange can be had: then the worker
        reports its inputs itself (``GRADER_NO_EXCHANGE=1`` turns the exchange off)."""
        if os.environ.get("GRADER_NO_EXCHANGE"):
            return None
        try:
            return make()
        except (OSError, AttributeError):  # no memfd_create (not Linux, an old kernel), no writable tmpfs
            return None

    @classmethod
    def memfd(cls) -> "Exchange":
        """An anonymous file for a worker that inherits the descriptor (the local backend)."""
        return cls(os.memfd_create("grader-exchange", os.MFD_CLOEXEC))

    @classmethod
    def file(cls) -> "Exchange":
        """A file a container can bind-mount: under ``GRADER_SANDBOX_TMPDIR`` (a path the engine's host sees too)
        when set, else on /dev/shm (a tmpfs), else in the temp folder. Its folder is the host's alone (0700);
        the file is 0666 so the container's user can open it through the bind mount."""
        parent = os.environ.get("GRADER_SANDBOX_TMPDIR") or None
        if parent is None and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
            parent = "/dev/shm"
        folder = tempfile.mkdtemp(prefix=scratch_prefix("exchange"), dir=parent)
        path = os.path.join(folder, "inputs")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o666)
        return cls(fd, path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.path:
            for remove in (os.unlink, os.rmdir):
                try:
                    remove(self.path if remove is os.unlink else os.path.dirname(self.path))
                except OSError:
                    pass
            self.path = None

    # -- the boot handshake ----------------------------------------------------------------------------------
    def verify(self) -> bool:
        """After the worker's boot frame: did its write through the mapping reach the host's file?"""
        data = os.pread(self.fd, 2 * NONCE, 0)
        self.verified = data == self.nonce + bytes(b ^ 0xFF for b in self.nonce)
        if not self.verified:
            self.reason = ("the worker's write through its mapping is not visible to the host"
                           if data[NONCE:] != bytes(NONCE) else "the worker did not map the exchange")
        else:
            self.reason = ""
        return self.verified

    # -- one call ------------------------------------------------------------------------------------------
    def place(self, header: dict, arrays: dict, track: str) -> list:
        """Write every array argument of the request (``args``/``kwargs`` specs naming an ``array``) into the
        file, in the layout the spec asks for; mark the spec ``shared`` (where the worker maps it) and drop the
        array from the pipe. Returns what :meth:`read_back` needs."""
        import numpy as np  # here, not at import: the worker starts before the host pays for NumPy

        from harness.worker.wire import arrange  # the layouts the worker builds from pipe arrays too

        placed, offset, chunks = [], PAGE, []
        specs = list(header.get("args", [])) + list(header.get("kwargs", {}).values())
        for spec in specs:
            if isinstance(spec, dict) and isinstance(spec.get("tuple"), list):  # e.g. a KV cache (K, V)
                specs.extend(spec["tuple"])
                continue
            name = spec.get("array") if isinstance(spec, dict) else None
            if name is None or name not in arrays:
                continue
            value = np.asarray(arrays[name])
            holder, view = arrange(value, spec.get("layout", "C"), track, spec.get("tensor", True))
            skip = view.__array_interface__["data"][0] - holder.__array_interface__["data"][0]
            spec["shared"] = {"offset": offset, "nbytes": int(holder.nbytes), "skip": int(skip),
                              "shape": list(view.shape), "strides": list(view.strides), "dtype": view.dtype.str}
            placed.append((name, value, spec["shared"]))
            chunks.append((offset, holder))
            offset = _align(offset + max(int(holder.nbytes), 1))
        if os.fstat(self.fd).st_size < offset:
            os.ftruncate(self.fd, offset)
        for at, holder in chunks:
            data = memoryview(np.ascontiguousarray(holder)).cast("B")
            while data:
                n = os.pwrite(self.fd, data, at)
                data, at = data[n:], at + n
        used = {name for name, _, _ in placed}
        for name in used:
            del arrays[name]
        return placed

    def read_back(self, placed: list) -> dict:
        """Each placed argument as the host finds it now (an empty array when the worker shrank the file)."""
        import numpy as np  # here, not at import: the worker starts before the host pays for NumPy

        out = {}
        for name, value, shared in placed:
            data = os.pread(self.fd, shared["nbytes"], shared["offset"])
            if len(data) != shared["nbytes"]:
                out[name] = np.zeros((0,), dtype=value.dtype)
                continue
            view = np.ndarray(tuple(shared["shape"]), dtype=np.dtype(shared["dtype"]), buffer=data,
                              offset=shared["skip"], strides=tuple(shared["strides"]))
            out[name] = np.array(view, order="C")
        return out
