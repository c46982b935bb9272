"""The wire protocol: only plain numeric arrays cross; anything malformed is rejected, never unpickled."""

import io
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
