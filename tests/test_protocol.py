"""The wire protocol: only plain numeric arrays cross; anything malformed is rejected, never unpickled."""

import io
import os
import pickle
import struct
import sys
import textwrap

import numpy as np
import pytest

from harness.worker import wire
from harness.session.channel import WorkerSession
from harness.core.errors import WorkerFault
from harness.sandbox.base import Limits, Sandbox
from harness.sandbox.local import LocalHandle


def npy(arr, **kw) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def header(d: dict) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, d)
    return buf.getvalue()


def test_round_trip_keeps_values_dtype_and_order():
    for arr in (np.arange(12.0).reshape(3, 4), np.asfortranarray(np.ones((2, 3), np.float32)),
                np.array([[True, False]]), np.zeros((0, 4)), np.complex64(1 + 2j) * np.ones(3)):
        out = wire.decode_array(wire.encode_array(arr))
        assert out.dtype == arr.dtype and out.shape == arr.shape and np.array_equal(out, arr)


@pytest.mark.parametrize("blob,needle", [
    (npy(np.array([{"a": 1}], dtype=object), allow_pickle=True), "not allowed"),
    (npy(np.zeros(3, dtype=[("a", "f8"), ("b", "i4")])), "not allowed"),
    (npy(np.array(["text"])), "not allowed"),
    (npy(np.zeros(4))[:-8], "promises"),
    (npy(np.zeros(4)) + b"\0" * 8, "promises"),
    (header({"descr": "<f8", "fortran_order": False, "shape": (10**12,)}), "cap"),
    (header({"descr": "<f8", "fortran_order": False, "shape": (2, 3)}) + b"\0" * 48 + b"trailing", "promises"),
    (b"\x93NUMPY\x01\x00" + struct.pack("<H", 40) + b"{'descr': __import__('os'), }".ljust(40), "malformed"),
    (b"not an npy file at all", "malformed"),
])
def test_decode_rejects(blob, needle):
    with pytest.raises(wire.WireError, match=needle):
        wire.decode_array(blob)


def test_frame_limits():
    with pytest.raises(wire.WireError, match="magic"):
        wire.parse_prefix(b"EVIL" + struct.pack(">I", 10))
    with pytest.raises(wire.WireError, match="exceeds"):
        wire.parse_prefix(wire.MAGIC + struct.pack(">I", wire.MAX_JSON_BYTES + 1))
    with pytest.raises(wire.WireError, match="not a JSON object"):
        wire.parse_header(b"[1, 2]")
    with pytest.raises(wire.WireError, match="cap"):
        wire.parse_header(b'{"arrays": [{"name": "out", "nbytes": 999999999999}]}')


class ScriptSandbox(Sandbox):
    """A 'worker' that is any Python script: lets the tests speak the protocol badly on purpose."""

    name = "local"

    def __init__(self, script: str):
        self.script = textwrap.dedent(script)

    def start(self, *, track, entry, submission, limits):
        import subprocess

        proc = subprocess.Popen([sys.executable, "-c", self.script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        return LocalHandle(proc, "/nonexistent-workdir")


READY = "import sys, json, struct\nout = sys.stdout.buffer\n" \
        "def frame(head, blobs=()):\n" \
        "    head = dict(head, arrays=[{'name': n, 'nbytes': len(b)} for n, b in blobs])\n" \
        "    text = json.dumps(head).encode()\n" \
        "    out.write(b'AGW1' + struct.pack('>I', len(text)) + text + b''.join(b for _, b in blobs)); out.flush()\n" \
        "frame({'kind': 'boot'})\n" \
        "frame({'kind': 'ready'})\n" \
        "sys.stdin.buffer.read(8)\n"


def session_for(script: str, tmp_path, **limits) -> WorkerSession:
    sub = tmp_path / "s.py"
    sub.write_text("")
    return WorkerSession(ScriptSandbox(script), track="numpy", entry="mha", submission=sub,
                         limits=Limits(call_timeout_s=5, startup_timeout_s=10).replace(**limits))


def ask(session) -> WorkerFault:
    with pytest.raises(WorkerFault) as info:
        session.request({"op": "ping"})
    session.close()
    return info.value


def test_pickle_payload_is_never_unpickled(tmp_path):
    canary = tmp_path / "canary"

    class Evil:
        def __reduce__(self):
            return (open, (str(canary), "w"))

    payload = npy(np.array([Evil()], dtype=object), allow_pickle=True)
    script = READY + f"frame({{'kind': 'result'}}, [('out', {payload!r})])\nimport time; time.sleep(5)\n"
    fault = ask(session_for(script, tmp_path))
    assert fault.status == "error" and "not allowed" in fault.message
    assert not canary.exists()


@pytest.mark.parametrize("tail,needle", [
    ("out.write(b'garbage!' * 4); out.flush()", "magic"),
    ("out.write(b'AGW1' + struct.pack('>I', 1 << 30)); out.flush()", "exceeds"),
    ("frame({'kind': 'result'}, [('out', b'\\x93NUMPY' + b'x' * 40)])", "malformed"),
    ("text = b'not json'; out.write(b'AGW1' + struct.pack('>I', len(text)) + text); out.flush()", "not JSON"),
])
def test_malformed_frames_are_the_candidates_failure(tmp_path, tail, needle):
    fault = ask(session_for(READY + tail + "\nimport time; time.sleep(5)\n", tmp_path))
    assert fault.status == "error"
    assert needle in fault.message


def test_oversized_array_is_rejected_before_reading_it(tmp_path):
    script = READY + ("head = {'kind': 'result', 'arrays': [{'name': 'out', 'nbytes': %d}]}\n"
                      "text = json.dumps(head).encode(); out.write(b'AGW1' + struct.pack('>I', len(text)) + text)\n"
                      "out.flush(); import time; time.sleep(5)\n") % (wire.MAX_ARRAY_BYTES * 4)
    fault = ask(session_for(script, tmp_path))
    assert fault.status == "error" and "cap" in fault.message


def test_silence_is_a_timeout_and_the_worker_is_killed(tmp_path):
    session = session_for(READY + "import time; time.sleep(60)\n", tmp_path, call_timeout_s=0.5)
    with pytest.raises(WorkerFault) as info:
        session.request({"op": "ping"})
    assert info.value.status == "timeout"
    assert session.handle.proc.poll() is not None
    session.close()


def test_stderr_flood_is_output_limit(tmp_path):
    script = READY + "import sys\nwhile True: sys.stderr.write('x' * 65536)\n"
    session = session_for(script, tmp_path, output_bytes=100_000)
    with pytest.raises(WorkerFault) as info:
        session.request({"op": "ping"})
    assert info.value.status == "output_limit"
    session.close()


# -- the input exchange: argument memory the host reads back itself (harness/sandbox/exchange.py) ------------
from pathlib import Path  # noqa: E402

from harness.core.case import Case  # noqa: E402
from harness.core.errors import CandidateException  # noqa: E402
from harness.core.exercises import get_exercise  # noqa: E402
from harness.sandbox.exchange import Exchange, arrange  # noqa: E402
from harness.sandbox.local import LocalSandbox  # noqa: E402
from harness.session.candidate import Candidate, StructureError  # noqa: E402
from harness.session.static_layout import declared_parameters  # noqa: E402

REDTEAM = Path(__file__).resolve().parent / "redteam"
MHA_NUMPY = (Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py").read_text()


def small_case(seed=0, dtype="float64") -> Case:
    rng = np.random.default_rng(seed)
    d = 8
    return Case(x=rng.standard_normal((2, 5, d)).astype(dtype), wq=rng.standard_normal((d, d)).astype(dtype),
                wk=rng.standard_normal((d, d)).astype(dtype), wv=rng.standard_normal((d, d)).astype(dtype),
                wo=rng.standard_normal((d, d)).astype(dtype), h=2, mask=np.triu(np.ones((5, 5), bool), 1))


def numpy_candidate(tmp_path, source: str, sandbox=None) -> Candidate:
    sub = tmp_path / "submission.py"
    sub.write_text(source)
    session = WorkerSession(sandbox or LocalSandbox(), track="numpy", entry="mha", submission=sub,
                            limits=Limits(call_timeout_s=20, startup_timeout_s=60))
    return Candidate(session, get_exercise("mha"), "numpy")


@pytest.mark.parametrize("track", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["C", "F", "transposed", "strided"])
def test_exchange_places_each_layout_in_place_and_reads_it_back(track, layout):
    value = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    holder, view = arrange(value, layout, track)
    assert np.array_equal(view, value) and np.shares_memory(holder, view)
    if layout == "F" and track == "numpy":
        assert view.flags.f_contiguous and not view.flags.c_contiguous
    if layout == "strided":
        assert not view.flags.c_contiguous
    ex = Exchange.memfd()
    try:
        header = {"args": [{"array": "x", "layout": layout}, {"int": 2}], "kwargs": {}}
        arrays = {"x": value}
        placed = ex.place(header, arrays, track)
        shared = header["args"][0]["shared"]
        assert arrays == {} and shared["offset"] % 4096 == 0  # the array no longer crosses the pipe
        assert np.array_equal(ex.read_back(placed)["x"], value)
        # what the worker does: a view over the mapping; a write through it is what the host then reads
        import mmap

        region = mmap.mmap(ex.fd, shared["nbytes"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                           offset=shared["offset"])
        mapped = np.ndarray(tuple(shared["shape"]), dtype=np.dtype(shared["dtype"]), buffer=region,
                            offset=shared["skip"], strides=tuple(shared["strides"]))
        assert np.array_equal(mapped, value) and mapped.strides == view.strides
        mapped[0, 0, 0] = -1.0
        after = ex.read_back(placed)["x"]
        assert after[0, 0, 0] == -1.0 and np.array_equal(after.ravel()[1:], value.ravel()[1:])
        del mapped
        region.close()
    finally:
        ex.close()


def test_a_truncated_exchange_reads_back_as_changed_never_a_host_crash():
    ex = Exchange.memfd()
    try:
        header = {"args": [{"array": "x"}], "kwargs": {}}
        placed = ex.place(header, {"x": np.ones((64, 64))}, "numpy")
        os.ftruncate(ex.fd, 10)  # what a hostile worker can do to its end
        assert ex.read_back(placed)["x"].shape == (0,)
    finally:
        ex.close()


def test_the_host_reads_back_a_mutation_the_rewritten_worker_hides(tmp_path):
    candidate = numpy_candidate(tmp_path, (REDTEAM / "patch_worker_hide_mutation.py").read_text())
    try:
        case = small_case()
        result = candidate.run(case, return_inputs=True)
        assert candidate.session.readback_log == {"host": 1}
        assert set(result.read_back) == {"x", "wq", "wk", "wv", "wo", "mask"}
        assert np.array_equal(result.inputs_after["x"], case.x * 0.5)
        assert not np.array_equal(result.inputs_after["mask"], case.mask)
    finally:
        candidate.session.close()


def test_the_self_reported_check_is_what_the_rewrite_fools(tmp_path, monkeypatch):
    """Without the exchange (GRADER_NO_EXCHANGE) the same file passes the mutation check: the reason for it."""
    monkeypatch.setenv("GRADER_NO_EXCHANGE", "1")
    candidate = numpy_candidate(tmp_path, (REDTEAM / "patch_worker_hide_mutation.py").read_text())
    try:
        case = small_case()
        result = candidate.run(case, return_inputs=True)
        assert result.read_back == () and candidate.session.readback_log["worker"] == 1
        assert "no input exchange" in candidate.session.readback_log["reason"]
        assert np.array_equal(result.inputs_after["x"], case.x)  # the forged frame
    finally:
        candidate.session.close()


def test_a_mutation_undone_before_returning_is_no_mutation(tmp_path):
    source = MHA_NUMPY + textwrap.dedent("""
        _mha = mha

        def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
            saved = X.copy()
            X *= 3.0
            X[...] = saved
            return _mha(X, Wq, Wk, Wv, Wo, h, mask=mask)
        """)
    candidate = numpy_candidate(tmp_path, source)
    try:
        case = small_case()
        result = candidate.run(case, return_inputs=True)
        assert "x" in result.read_back and np.array_equal(result.inputs_after["x"], case.x)
    finally:
        candidate.session.close()


@pytest.mark.parametrize("layout,f_contiguous", [("C", False), ("F", True), ("strided", False)])
def test_the_candidate_gets_views_of_the_exchange_in_the_requested_layout(tmp_path, layout, f_contiguous):
    source = textwrap.dedent("""
        import mmap

        def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
            base = X
            while isinstance(getattr(base, "base", None), type(X)):
                base = base.base
            raise ValueError(f"|{X.flags.f_contiguous}|{X.flags.c_contiguous}|{X.strides}|"
                             f"{type(base.base).__name__}|{X.flags.writeable}|")
        """)
    candidate = numpy_candidate(tmp_path, source)
    try:
        case = small_case()
        with pytest.raises(CandidateException) as info:
            candidate.run(case, layout=layout, return_inputs=True)
        f_c, c_c, strides, owner, writeable = info.value.message.split("|")[1:6]
        assert (f_c, owner, writeable) == (str(f_contiguous), "mmap", "True")
        if layout == "strided":
            assert c_c == "False" and strides.endswith("16)")  # every other float64 of a doubled last axis
    finally:
        candidate.session.close()


def test_a_worker_without_the_handshake_falls_back_to_its_own_report(tmp_path):
    class WithExchange(ScriptSandbox):
        def start(self, **kw):
            handle = super().start(**kw)
            handle.exchange = Exchange.memfd()  # a 'worker' that never maps it
            return handle

    script = READY + "frame({'kind': 'result', 'output': {}})\nsys.stdin.buffer.read(8)\n"
    sub = tmp_path / "s.py"
    sub.write_text("")
    session = WorkerSession(WithExchange(script), track="numpy", entry="mha", submission=sub,
                            limits=Limits(call_timeout_s=5, startup_timeout_s=10))
    try:
        session.ensure_ready()
        assert session.handle.exchange.verified is False
        session.request({"op": "call", "args": [{"array": "x"}], "kwargs": {}}, {"x": np.ones(3)}, readback=True)
        assert session.read_back is None and session.readback_log["worker"] == 1
        assert "did not map" in session.readback_log["reason"]
    finally:
        session.close()


TORCH_SEPARATE = textwrap.dedent("""
    import torch
    from torch import nn

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, n_heads, bias=True):
            super().__init__()
            self.h, self.d_k = n_heads, d_model // n_heads
            self.w_q = nn.Linear(d_model, d_model, bias=bias)
            self.w_k = nn.Linear(d_model, d_model, bias=bias)
            self.w_v = nn.Linear(d_model, d_model, bias)
            self.w_o = nn.Linear(in_features=d_model, out_features=self.h * self.d_k, bias=bias)
            self.drop = nn.Dropout(0.0)
            self.register_buffer("scale", torch.tensor(1.0))
    """)


@pytest.mark.parametrize("bias", [True, False])
def test_static_read_of_the_declared_parameters(bias):
    got = declared_parameters(TORCH_SEPARATE, "MultiHeadAttention", [8, 2], {"bias": bias})
    want = {f"w_{t}.weight": (8, 8) for t in "qkvo"}
    if bias:
        want.update({f"w_{t}.bias": (8,) for t in "qkvo"})
    assert got.params == want
    reported = [{"name": n, "shape": list(s)} for n, s in want.items()]
    assert got.disagreement(reported) is None
    renamed = [dict(p, name=p["name"].replace("w_q", "qkv")) for p in reported]
    assert "differ from those the class declares" in got.disagreement(renamed)
    reshaped = [dict(p, shape=[8, 4]) if p["name"] == "w_o.weight" else p for p in reported]
    assert "w_o.weight with shape [8, 4]" in got.disagreement(reshaped)


@pytest.mark.parametrize("body,reason", [
    ("for t in 'qkvo':\n            setattr(self, 'w_' + t, nn.Linear(d_model, d_model))", "setattr"),
    ("self.attn = nn.MultiheadAttention(d_model, n_heads)", "cannot follow"),
    ("self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])", "cannot follow"),
    ("self._build(d_model)", "self._build"),
    ("if d_model > self.unknown:\n            self.w_q = nn.Linear(d_model, d_model)", "value of self.unknown"),
])
def test_static_read_says_unknown_rather_than_guess(body, reason):
    source = ("import torch\nfrom torch import nn\n\nclass MultiHeadAttention(nn.Module):\n"
              "    def __init__(self, d_model, n_heads, bias=True):\n        super().__init__()\n        " + body + "\n")
    got = declared_parameters(source, "MultiHeadAttention", [8, 2], {"bias": True})
    assert got.params is None and reason in got.reason
    assert got.disagreement([{"name": "anything", "shape": [1]}]) is None


def test_static_read_refuses_a_class_rewritten_at_run_time():
    source = TORCH_SEPARATE + "\nMultiHeadAttention.__init__ = lambda self, *a, **k: nn.Module.__init__(self)\n"
    assert declared_parameters(source, "MultiHeadAttention", [8, 2], {}).params is None


def test_a_forged_parameter_report_is_a_structure_failure(tmp_path):
    sub = tmp_path / "submission.py"
    sub.write_text((REDTEAM / "patch_worker_fake_layout.py").read_text())
    session = WorkerSession(LocalSandbox(), track="torch", entry="MultiHeadAttention", submission=sub,
                            limits=Limits(call_timeout_s=30, startup_timeout_s=90))
    candidate = Candidate(session, get_exercise("mha"), "torch")
    try:
        with pytest.raises(StructureError, match="do not match its source") as info:
            candidate.build(d=8, h=2, bias=True)
        assert info.value.diagnostics["declared"] == ["in_proj.bias", "in_proj.weight", "out_proj.bias",
                                                      "out_proj.weight"]
        assert candidate.layout_check == "host: static read"
    finally:
        session.close()
