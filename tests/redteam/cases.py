"""The red-team manifest: one entry per file in this folder, with the exercise, the track and the expected outcome.

Every case runs under both sandbox backends (tests/test_redteam.py). For every case but the controls the verdict
is never ``passed``; ``verdicts`` says which of ``failed``/``error`` it is (``error`` = the file never became
ready: it does not import, or has no entry point), ``only`` bounds the statuses every test may have, ``some``
names statuses at least one test must have, ``tests`` pins single tests, ``message`` is a substring of the first
non-passing test's message and ``tripwire`` the expected (static_scan, runtime_tripwire) of the banned-API test.

Placeholders the test substitutes before grading: ``@@MARKER@@`` (a unique tag, also used as the process name of
anything the submission spawns), ``@@CANARY@@`` (a host path that must never be created) and ``@@NET@@`` (JSON
list of the test's listening [host, port] pairs).
"""

from __future__ import annotations

import dataclasses

F64 = "test_matches_reference_float64"
SDPA = "F.scaled_dot_product_attention"
MHA = "nn.MultiheadAttention"
FAILED = ("failed",)
ERROR = ("error",)
HANG = ("timeout", "error")          # the hanging call times out; after the restart budget the rest error
HANG_LIMITS = {"call_timeout_s": 1}  # a hang is a hang at 1 s as at 2 (the corpus's default): a second less per
                                     # timed-out call, twice per grade, on every backend (issue 24)
HANG_ONCE = {**HANG_LIMITS, "max_restarts": 0}  # a plain hang: one timeout, the rest error (the restart after a
                                                # hostile kill is ignore_sigterm's and fork_bomb's)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    summary: str
    track: str = "numpy"
    exercise: str = "mha"
    verdicts: tuple = FAILED
    only: tuple | None = None
    some: tuple = ()
    tests: dict = dataclasses.field(default_factory=dict)
    message: str | None = None
    tripwire: tuple | None = None
    limits: dict = dataclasses.field(default_factory=dict)
    late_s: float = 0.0               # wait this long after grading, then look again for survivors and files
    cli: bool = False                 # also graded through the `grade` command line
    slow: bool = False

    @property
    def control(self) -> bool:
        return self.verdicts == ("passed",)


CONTROL = dict(verdicts=("passed",), only=("passed",))

CASES = [
    # -- controls: must pass ----------------------------------------------------------------------------
    Case("control_numpy", "correct NumPy implementation", **CONTROL, cli=True),
    Case("control_torch", "correct torch module (fused qkv)", track="torch", **CONTROL,
         tripwire=((), ())),
    Case("control_comment_sdpa", "correct; banned APIs only named in comments and strings", track="torch",
         **CONTROL, tripwire=((), ())),
    # -- exits and exceptions ---------------------------------------------------------------------------
    Case("exit_at_import", "sys.exit(0) at import", verdicts=ERROR, only=ERROR, message="SystemExit", cli=True),
    Case("os_exit_in_call", "os._exit(0) inside the call", only=ERROR, message="exited", cli=True),
    Case("system_exit_in_call", "raise SystemExit(0) inside the call", only=ERROR, message="SystemExit"),
    Case("keyboard_interrupt", "raise KeyboardInterrupt inside the call", only=ERROR, message="KeyboardInterrupt"),
    Case("base_exception_subclass", "BaseException subclass whose __str__ raises SystemExit", only=ERROR,
         message="Sneaky"),
    Case("syntax_error", "does not parse", verdicts=ERROR, only=ERROR, message="SyntaxError"),
    Case("missing_entry_point", "defines the wrong name", verdicts=ERROR, only=ERROR, message="defines no 'mha'"),
    Case("wrong_signature", "mha(X, W)", only=ERROR, message="TypeError"),
    # -- lying outputs ----------------------------------------------------------------------------------
    Case("return_none", "returns None", only=("failed", "passed"), message="NoneType"),
    Case("monkeypatch_comparisons", "patches numpy/torch/unittest/pytest comparisons", tests={F64: FAILED}),
    Case("ndarray_subclass_lying", "ndarray subclass whose comparisons lie", only=("failed", "passed"),
         message="Liar"),
    Case("array_protocol_object", "object with __array__ that kills the worker", only=("failed", "passed"),
         message="Fake"),
    Case("object_dtype", "object-dtype array", only=("failed", "passed"), message="dtype object"),
    Case("float16_output", "correct values as float16", tests={"test_dtype_preserved[float64]": FAILED, F64: FAILED}),
    Case("int_output", "int64 output", only=("failed", "passed"), message="int64"),
    Case("complex_output", "complex128 output", only=("failed", "passed"), message="complex128"),
    Case("broadcast_row_output", "(1, d) output that broadcasts", only=("failed", "passed"),
         message="no broadcasting"),
    Case("scalar_output", "0-d array / NumPy scalar output", only=("failed", "passed")),
    Case("nan_inf_output", "NaN and Inf of the right shape", tests={F64: FAILED}, message="NaN"),
    Case("hardcoded_example", "hard-coded answer to a public-looking example", tests={F64: FAILED}),
    Case("mutate_inputs", "correct output, arguments scribbled over in place",
         tests={"test_inputs_not_mutated": FAILED, F64: ("passed",)}),
    # -- the protocol -----------------------------------------------------------------------------------
    Case("forged_pickle_frame", "forged frame carrying a pickle (canary proves it never ran)", only=ERROR,
         message="not allowed", cli=True),
    Case("huge_npy_header", "npy header claiming 8 EB / a 4 GiB header", only=ERROR, message="malformed frame"),
    Case("huge_frame_header", "frame header length 4 GiB / a 1 TiB array", only=ERROR, message="exceeds"),
    Case("forged_deep_json", "JSON header nested 100k deep / fields of hostile types", only=ERROR,
         message="malformed frame"),
    Case("protocol_flood", "64 MB of junk written to the protocol pipe", only=ERROR, message="bad frame magic"),
    Case("patch_worker_protocol", "rewrites Worker.send to claim success", tests={F64: FAILED}),
    Case("patch_worker_hide_mutation", "mutates its arguments; the rewritten worker sends copies taken before the call",
         tests={"test_inputs_not_mutated": FAILED, F64: ("passed",)}, message="modified its arguments"),
    Case("patch_worker_hide_mutation_torch", "torch: mutates x and the mask; the rewritten worker sends copies",
         track="torch", tests={"test_inputs_not_mutated": FAILED, F64: ("passed",)}),
    Case("patch_worker_fake_layout", "torch: in_proj/out_proj reported as qkv/wo by a rewritten worker",
         track="torch", tests={"test_parameter_layout": FAILED}, message="do not match its source"),
    Case("late_thread_writer", "thread injects extra result frames between calls", tests={F64: FAILED}),
    Case("symlink_fifo_outputs", "symlinks and FIFOs named like result files", tests={F64: FAILED}),
    # -- forging, searching, leaking --------------------------------------------------------------------
    Case("forged_reports", "fake reports in every writable place + a fake report on stdout", tests={F64: FAILED},
         cli=True),
    Case("search_filesystem", "searches the disk for the reference / the suite", tests={F64: FAILED}),
    Case("search_process_memory", "searches sys.modules, gc, inspect for the reference / expected outputs",
         tests={F64: FAILED}),
    Case("import_grader", "imports the grader's modules (plain, importlib, runpy, by path)", tests={F64: FAILED}),
    Case("env_secrets", "dumps every readable environment looking for secrets", only=ERROR, message="DUMP",
         cli=True),
    Case("network_exfil", "TCP/UDP/DNS/HTTP/Docker-socket exfiltration", tests={F64: FAILED}),
    # -- resources --------------------------------------------------------------------------------------
    Case("infinite_loop", "while True: pass", only=HANG, some=("timeout",), slow=True,
         limits=HANG_ONCE),
    Case("long_sleep", "sleeps for a day", only=HANG, some=("timeout",), slow=True,
         limits=HANG_ONCE),
    Case("ignore_sigterm", "ignores SIGTERM and friends, then hangs", only=HANG, some=("timeout",), slow=True,
         limits=HANG_LIMITS),
    Case("fork_bomb", "2**8 tagged processes sleeping forever", only=HANG, some=("timeout",), slow=True,
         limits=HANG_LIMITS),
    Case("fork_returns_twice", "forks in every call; both processes answer", only=("failed", "error", "passed",
                                                                                    "timeout")),
    Case("thread_bomb", "threads until refused", tests={F64: ("failed", "error", "timeout")}),
    Case("memory_bomb", "touches memory until something gives", only=("memory", "timeout", "error"),
         some=("memory",), limits={"memory_mb": 512, "call_timeout_s": 10}),  # a cgroup OOM can take a moment
    Case("disk_fill", "fills every writable place, SIGXFSZ ignored", tests={F64: FAILED}),
    Case("stdout_flood_binary", "binary/ANSI flood on stdout", only=("output_limit", "error"),
         some=("output_limit",), cli=True),
    Case("stderr_flood_ansi", "ANSI/C1/invalid UTF-8 flood on stderr", only=("output_limit", "error"),
         some=("output_limit",)),
    Case("stderr_junk_then_crash", "terminal junk on stderr (under the cap), then exit 3", only=ERROR,
         message="exit code 3"),
    Case("kill_everything", "SIGKILL to its parent, its group, kill -1, pid 1, itself",
         only=("error", "failed")),
    Case("daemon_double_fork", "double-forked daemon that forges files after the call", tests={F64: FAILED},
         late_s=1.5),
    # -- hostile text -----------------------------------------------------------------------------------
    Case("huge_exception_message", "5 MB exception message, 900 frames deep", only=ERROR, message="ValueError"),
    Case("escape_sequence_exception", "escapes, CR tricks, bidi, NUL, lone surrogate in type name and message",
         only=ERROR, cli=True),
    Case("unicode_megabyte_message", "a megabyte of astral-plane characters", only=ERROR, message="ValueError"),
    Case("parser_recursion_bomb", "a 10 KB expression that makes ast.parse raise RecursionError", track="torch",
         verdicts=ERROR, only=("error", "failed"), message="RecursionError", tripwire=((SDPA,), ()), cli=True),
    # -- torch track ------------------------------------------------------------------------------------
    Case("torch_half_output", "correct module returning detached float16", track="torch",
         tests={"test_dtype_preserved[float64]": FAILED}),
    Case("torch_tensor_subclass", "Tensor subclass with a lying __torch_function__", track="torch",
         tests={F64: FAILED}, message="Liar"),
    Case("torch_long_param_names", "60 parameters with 250-character escape-laden names", track="torch",
         tests={"test_parameter_layout": FAILED}),
    Case("tripwire_sdpa_direct", "calls F.scaled_dot_product_attention", track="torch",
         tests={"test_no_builtin_attention": FAILED}, tripwire=((SDPA,), (SDPA,))),
    Case("tripwire_getattr_hidden", "reaches SDPA via getattr(F, 'scaled_' + ...)", track="torch",
         tests={"test_no_builtin_attention": FAILED}, tripwire=((), (SDPA,))),
    Case("tripwire_mha_module", "wraps nn.MultiheadAttention", track="torch",
         tests={"test_no_builtin_attention": FAILED, "test_parameter_layout": FAILED}, tripwire=((MHA,), (MHA,))),
]

BY_NAME = {c.name: c for c in CASES}
