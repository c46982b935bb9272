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
                np.array([[True, False]]), np.zeros((0, 4)), np.complex64(1 + 2j) * np.ones(3), np.arange(9)[::2]):
        for _ in range(2):  # the second time with the header kept from the first
            assert wire.encode_array(arr) == npy(np.ascontiguousarray(arr))  # the bytes numpy writes
            out = wire.decode_array(wire.encode_array(arr))
            assert out.dtype == arr.dtype and out.shape == arr.shape and np.array_equal(out, arr)
    with pytest.raises(ValueError, match="allow_pickle"):
        wire.encode_array(np.array([{}], dtype=object))


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


def _numpy_reads(blob: bytes):
    """numpy's own reader of a version 1.0 header: (shape, fortran, dtype, data start), or None where it refuses."""
    f = io.BytesIO(blob)
    try:
        if np.lib.format.read_magic(f) != (1, 0):
            return None
        return (*np.lib.format.read_array_header_1_0(f, max_header_size=wire.MAX_NPY_HEADER), f.tell())
    except Exception:
        return None


def test_the_fast_header_reader_reads_as_numpy_does_or_leaves_it_to_numpy():
    """wire's regular-expression reader of the header numpy writes: on every header numpy writes for an allowed
    dtype it reads what numpy's reader reads (and is used: it is the fast path); on a header changed in any one
    byte it either reads what numpy's reader reads or declines (numpy's reader then parses or refuses it)."""
    arrays = [np.zeros(()), np.ones(7, np.float32), np.zeros((0, 4)), np.arange(6).reshape(2, 3),
              np.asfortranarray(np.ones((3, 2))), np.ones((1, 2, 3, 4, 5), np.complex64), np.array([True]),
              np.zeros((123456, 0), np.int8), np.zeros((10, 11, 12), np.uint8)]
    every_dtype = [np.zeros((2, 3), dtype=t) for t in sorted(wire.ALLOWED_DTYPES)]
    fast, declined = 0, 0
    for n, arr in enumerate(arrays + every_dtype):
        blob = npy(arr)
        seen = _numpy_reads(blob)
        assert wire._header(blob) == seen
        assert wire._CANONICAL.fullmatch(blob, 10, seen[3]), blob[:seen[3]]   # the fast path read it
        for i in range(6, seen[3] if n < len(arrays) else 6):
            for b in (0x20, 0x29, 0x2C, 0x30, 0x31, 0x3E, 0x0A, blob[i] ^ 1):
                changed = blob[:i] + bytes([b]) + blob[i + 1:]
                theirs = _numpy_reads(changed)
                try:
                    ours = wire._header(changed)
                except wire.WireError:
                    ours = None
                if ours is not None and theirs is not None and ours != theirs:
                    raise AssertionError(f"read {changed[:seen[3]]!r} as {ours}, numpy as {theirs}")
                if theirs is None:
                    assert ours is None, changed[:seen[3]]
                    declined += 1
                else:
                    fast += 1
    assert fast > 100 and declined > 100


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


def test_a_flood_written_before_the_answer_is_that_calls_whatever_the_pump_threads_timing(tmp_path, monkeypatch):
    """The flood is counted when the answer is read, not when the stderr pump's thread next gets the CPU: with a
    pump thread that never runs (a starved thread on a busy machine), a call whose worker wrote past the cap before
    answering is still output_limit (it was accepted, and the flood charged to a later call or test, before)."""
    from harness.session import channel

    monkeypatch.setattr(channel._StderrPump, "run", lambda self: None)
    script = READY + "sys.stderr.write('x' * 30000); sys.stderr.flush()\nframe({'kind': 'pong'})\n" \
                     "import time; time.sleep(5)\n"
    fault = ask(session_for(script, tmp_path, output_bytes=20_000))
    assert fault.status == "output_limit", (fault.status, fault.message)


# -- tuple outputs and tuple arguments (kv_cache: (out, (K, V)) back, a (K, V) cache in) ------------------
def _tree_script(head_fields: str, blobs: str = "[]") -> str:
    return READY + f"frame(dict({{'kind': 'result', 'output': {{'type': 'builtins.tuple', 'exact_type': False}}}}, " \
                   f"**{head_fields}), {blobs})\nimport time; time.sleep(5)\n"


@pytest.mark.parametrize("fields,needle", [
    ("{'tree': [0, [1, 2]], 'leaves': [{}, {}]}", "exactly once"),           # index 2 has no leaf
    ("{'tree': [0, [0, 1]], 'leaves': [{}, {}]}", "exactly once"),           # a leaf used twice
    ("{'tree': [0, 'K'], 'leaves': [{}]}", "'tree' is malformed"),            # not an index
    ("{'tree': [[[[0]]]], 'leaves': [{}]}", "'tree' is malformed"),           # nested too deep
    ("{'tree': [0], 'leaves': 'many'}", "'leaves' is malformed"),
    ("{'tree': list(range(17)), 'leaves': [{}] * 17}", "'leaves' is malformed"),  # over MAX_LEAVES
    ("{'leaves': [{}]}", "'tree' is malformed"),                              # leaves without a tree
])
def test_forged_output_tree_is_a_malformed_frame(tmp_path, fields, needle):
    fault = ask(session_for(_tree_script(fields), tmp_path))
    assert fault.status == "error" and needle in fault.message


def test_valid_output_tree_is_cleaned(tmp_path):
    fields = "{'tree': [0, [1, 2]], 'leaves': [{'type': 'x' * 999, 'exact_type': True, 'evil': 1}, {}, {}]}"
    session = session_for(_tree_script(fields), tmp_path)
    head, _ = session.request({"op": "ping"})
    session.close()
    assert head["tree"] == [0, [1, 2]]
    assert head["leaves"][0]["exact_type"] is True and "evil" not in head["leaves"][0]
    assert len(head["leaves"][0]["type"]) <= 200


def _worker(tmp_path, track: str, entry: str, source: str) -> WorkerSession:
    from harness.sandbox.local import LocalSandbox

    sub = tmp_path / "cand.py"
    sub.write_text(textwrap.dedent(source))
    session = WorkerSession(LocalSandbox(), track=track, entry=entry, submission=sub,
                            limits=Limits(call_timeout_s=30, startup_timeout_s=60))
    session.start()
    return session


def _call(session, cache, **extra):
    k, v = np.arange(6.0).reshape(1, 1, 2, 3), -np.arange(6.0).reshape(1, 1, 2, 3)
    arrays = {"x": np.ones((1, 1, 3)), "cache.0": k, "cache.1": v, wire.GRAD_OUTPUT: np.ones((1, 1, 3))}
    kwargs = {"cache": {"tuple": [{"array": "cache.0"}, {"array": "cache.1"}]}} if cache else {}
    head, out = session.request(dict({"op": "call", "args": [{"array": "x"}], "kwargs": kwargs, "tree": True,
                                      "return_inputs": True}, **extra), arrays)
    return head, out, k, v


def test_numpy_tuple_argument_and_tuple_output_round_trip(tmp_path):
    session = _worker(tmp_path, "numpy", "f", """
        import numpy as np
        def f(x, cache=None):
            k, v = cache
            k[0, 0, 0, 0] = 99.0                     # mutates the caller's cache: must be visible to the host
            return x * 2, (np.concatenate([k, k], 2), v.astype(np.float32))
    """)
    try:
        head, out, k, v = _call(session, cache=True)
    finally:
        session.close()
    assert head["tree"] == [0, [1, 2]] and len(head["leaves"]) == 3
    assert head["output"]["exact_type"] is False            # the whole is a tuple, not an array
    assert np.array_equal(out[wire.LEAF + "0"], 2 * np.ones((1, 1, 3)))
    assert out[wire.LEAF + "1"].shape == (1, 1, 4, 3) and out[wire.LEAF + "2"].dtype == np.float32
    assert out[wire.INPUT + "cache.0"][0, 0, 0, 0] == 99.0 and np.array_equal(out[wire.INPUT + "cache.1"], v)
    assert wire.OUT not in out


def test_tree_output_that_is_not_a_tuple_has_no_leaves(tmp_path):
    session = _worker(tmp_path, "numpy", "f", "def f(x, cache=None):\n    return x\n")
    try:
        head, out, _, _ = _call(session, cache=False)
    finally:
        session.close()
    assert "tree" not in head and head["output"]["exact_type"] is False
    assert not [k for k in out if k.startswith(wire.OUT)]


def test_torch_tuple_output_sends_tensors_and_gradients_from_the_first(tmp_path):
    session = _worker(tmp_path, "torch", "M", """
        import torch
        class M(torch.nn.Module):
            def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
                super().__init__()
                self.w = torch.nn.Linear(3, 3, bias=bias)
            def forward(self, x, cache=None):
                k, v = cache
                return self.w(x), (torch.cat([k, k], 2), v, "not a tensor")
    """)
    try:
        session.request({"op": "init", "args": [3, 1, 1], "kwargs": {"bias": True}})
        head, out, _, _ = _call(session, cache=True, op="forward", dtype="float64", state={},
                                grad_output=wire.GRAD_OUTPUT)
    except Exception:
        session.close()
        raise
    session.close()
    assert head["tree"] == [0, [1, 2, 3]]
    assert [leaf["exact_type"] for leaf in head["leaves"]] == [True, True, True, False]
    assert out[wire.LEAF + "1"].shape == (1, 1, 4, 3) and wire.LEAF + "3" not in out
    assert wire.GRAD + wire.PARAM + "w.weight" in out

# -- the function-style call op: gradients of tensor arguments, and the memory measurement (flash_attention) --
def _flash_candidate(tmp_path, track: str, source: str):
    from harness.core.exercises import get_exercise
    from harness.sandbox import get_sandbox
    from harness.session.candidate import Candidate

    sub = tmp_path / f"sub_{track}.py"
    sub.write_text(textwrap.dedent(source))
    ex = get_exercise("flash_attention")
    session = WorkerSession(get_sandbox("local"), track=track, entry=ex.entry(track), submission=sub,
                            limits=Limits(call_timeout_s=60))
    session.start()
    return session, Candidate(session, ex, track)


def test_call_sends_back_gradients_of_the_tensor_arguments(tmp_path):
    session, cand = _flash_candidate(tmp_path, "torch", """
        def flash_attention(Q, K, V, block_size=64, causal=False):
            return 2 * Q + K * V + (block_size if causal else 0)
    """)
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((1, 2, 3, 4)) for _ in range(4))
    try:
        result = cand.call({"Q": q, "K": k, "V": v}, {"block_size": 5, "causal": True}, grad_output=g)
        plain = cand.call({"Q": q, "K": k, "V": v}, {"block_size": 5, "causal": False})
    finally:
        session.close()
    assert np.allclose(result.out, 2 * q + k * v + 5) and np.allclose(plain.out, 2 * q + k * v)
    assert set(result.grads) == {"Q", "K", "V"} and plain.grads == {}
    assert np.allclose(result.grads["Q"], 2 * g)
    assert np.allclose(result.grads["K"], v * g) and np.allclose(result.grads["V"], k * g)



def test_call_honours_grad_output_for_tuple_outputs_and_keyword_tensors(tmp_path):
    """The call op shares the forward op's backward: a tuple output's gradient applies to its first value, and
    tensor arguments passed by keyword get their gradients back like positional ones."""
    session = _worker(tmp_path, "torch", "f", """
        import torch
        def f(x, w=None):
            return x * w + 1, (x.detach() * 0, "not a tensor")
    """)
    rng = np.random.default_rng(1)
    x, w, g = (rng.standard_normal((1, 2, 3)) for _ in range(3))
    try:
        head, out = session.request({"op": "call", "args": [{"array": "x", "requires_grad": True}],
                                     "kwargs": {"w": {"array": "w", "requires_grad": True}}, "tree": True,
                                     "grad_output": wire.GRAD_OUTPUT}, {"x": x, "w": w, wire.GRAD_OUTPUT: g})
    finally:
        session.close()
    assert head["tree"] == [0, [1, 2]] and np.allclose(out[wire.LEAF + "0"], x * w + 1)
    assert np.allclose(out[wire.GRAD + "x"], w * g)        # from the first value of the tuple
    assert np.allclose(out[wire.GRAD + "w"], x * g)        # a keyword tensor argument

NUMPY_MEMORY = """
    import numpy as np

    def flash_attention(Q, K, V, block_size=64, causal=False):
        if causal:                                     # one 8 MB temporary, then ten 1 MB ones freed in turn
            big = np.ones((1024, 1024))
            return Q + big[:Q.shape[2], :Q.shape[3]]
        for _ in range(10):
            t = np.ones((128, 1024))
        return Q.copy()
"""
TORCH_MEMORY = """
    import torch

    def flash_attention(Q, K, V, block_size=64, causal=False):
        if causal:
            big = torch.ones((1024, 1024), dtype=torch.float64)
            return Q + big[:Q.shape[2], :Q.shape[3]]
        for _ in range(10):
            t = torch.ones((128, 1024), dtype=torch.float64)
            t = t.view(1024, 128).transpose(0, 1)      # views allocate nothing
            t.add_(1)                                  # nor do in-place ops
        return Q.clone()
"""


@pytest.mark.parametrize("track,source", [("numpy", NUMPY_MEMORY), ("torch", TORCH_MEMORY)])
def test_call_measures_the_peak_extra_memory_in_the_worker(tmp_path, track, source):
    session, cand = _flash_candidate(tmp_path, track, source)
    q = np.zeros((1, 1, 4, 4))
    try:
        big = cand.call({"Q": q, "K": q, "V": q}, {"causal": True}, memory=True)
        small = cand.call({"Q": q, "K": q, "V": q}, {"causal": False}, memory=True)
        unmeasured = cand.call({"Q": q, "K": q, "V": q}, {"causal": False})
    finally:
        session.close()
    mib = 2 ** 20
    assert 8 * mib <= big.memory["peak_bytes"] < 9 * mib, big.memory
    assert 1 * mib <= small.memory["peak_bytes"] < 2.5 * mib, small.memory   # freed temporaries do not add up
    assert big.memory["method"] == ("tracemalloc" if track == "numpy" else "torch_dispatch")
    assert unmeasured.memory is None
    assert np.allclose(big.out, 1.0)


@pytest.mark.parametrize("memory", ["'lots'", "{'peak_bytes': -1}", "{'peak_bytes': 1.5}", "{}"])
def test_a_forged_memory_field_is_a_malformed_frame(tmp_path, memory):
    fault = ask(session_for(READY + f"frame({{'kind': 'result', 'memory': {memory}}})\nimport time; time.sleep(5)\n",
                            tmp_path))
    assert fault.status == "error" and "memory" in fault.message


def test_the_worker_says_how_long_the_candidates_calls_took(tmp_path):
    """Each answer carries the seconds spent in the candidate's own code (wire.CALL_S), measured or not; the host
    sums them (WorkerSession.calls_s: a benchmark's figure, never a verdict's) and keeps them out of the header."""
    source = "import time\n\ndef flash_attention(Q, K, V, block_size=64, causal=False):\n" \
             "    time.sleep(0.05)\n    return Q.copy()\n"
    session, cand = _flash_candidate(tmp_path, "numpy", source)
    q = np.zeros((1, 1, 4, 4))
    try:
        assert session.calls_s == 0.0
        cand.call({"Q": q, "K": q, "V": q}, {})
        cand.call({"Q": q, "K": q, "V": q}, {}, memory=True)
        head, _ = session.request({"op": "ping"})
    finally:
        session.close()
    assert 0.1 <= session.calls_s < 1.0, session.calls_s
    assert wire.CALL_S not in head


@pytest.mark.parametrize("spent", ["'lots'", "-1.0", "1e9", "float('nan')", "3", "None", "[0.5]"])
def test_a_forged_call_time_is_dropped_not_counted(tmp_path, spent):
    """The figure is the worker's word and only a benchmark reads it: a forged one is ignored, never a fault."""
    script = READY + f"frame({{'kind': 'pong', 'call_s': {spent}}})\nimport time; time.sleep(5)\n"
    session = session_for(script, tmp_path)
    try:
        head, _ = session.request({"op": "ping"})
    finally:
        session.close()
    assert head["kind"] == "pong" and "call_s" not in head
    assert session.calls_s == 0.0


@pytest.mark.parametrize("track,source", [
    ("numpy", "import tracemalloc\n\ndef flash_attention(Q, K, V, block_size=64, causal=False):\n"
              "    tracemalloc.stop()\n    return Q.copy()\n"),
    ("torch", "from torch.utils._python_dispatch import _pop_mode\n\n"
              "def flash_attention(Q, K, V, block_size=64, causal=False):\n    _pop_mode()\n    return Q.clone()\n"),
])
def test_a_call_that_switches_the_measurement_off_is_not_intact(tmp_path, track, source):
    """NumPy: the worker notices tracemalloc stopped; torch: leaving the popped mode fails the call itself."""
    from harness.core.errors import CandidateException

    session, cand = _flash_candidate(tmp_path, track, source)
    q = np.zeros((1, 1, 4, 4))
    try:
        if track == "numpy":
            assert cand.call({"Q": q, "K": q, "V": q}, {}, memory=True).memory["intact"] is False
            assert cand.call({"Q": q, "K": q, "V": q}, {}).out is not None   # the worker still serves calls
        else:
            with pytest.raises(CandidateException, match="mode stack"):
                cand.call({"Q": q, "K": q, "V": q}, {}, memory=True)
    finally:
        session.close()


# -- the input exchange: argument memory the host reads back itself (harness/sandbox/exchange.py) ------------
from pathlib import Path  # noqa: E402

from harness.core.case import Case  # noqa: E402
from harness.core.errors import CandidateException  # noqa: E402
from harness.core.exercises import get_exercise  # noqa: E402
from harness.sandbox.exchange import Exchange  # noqa: E402
from harness.worker.wire import arrange  # noqa: E402
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


def test_a_worker_cannot_claim_the_host_read_its_arguments_back(tmp_path):
    """Only the host sets ``read_back`` (the INPUT arrays it read from the exchange itself); a worker's is dropped."""
    session = session_for(READY + "frame({'kind': 'result', 'read_back': ['x', 'wq']})\nimport time; time.sleep(5)\n",
                          tmp_path)
    try:
        head, _ = session.request({"op": "ping"})
    finally:
        session.close()
    assert head["kind"] == "result" and "read_back" not in head
