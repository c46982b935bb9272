"""attention_cost: seeded configurations, the host's checks of plain values, and the public examples.

The candidate's answers arrive as Python values decoded on the host (``Candidate.call_function``): an int is an
int of any size, a float a float, a NumPy scalar or any other object an opaque stand-in naming its exact type
(``.type``, ``.text``). A count must be an exact ``int`` (not a bool); a shape a tuple of such ints; ``shapes``
a dict with exactly the expected keys. Anything else fails with a message saying what came back.
"""

from __future__ import annotations

from harness.core.checks import CheckFailure

from . import cost_oracle

FUNCTIONS = ("shapes", "params", "gqa_params", "flops", "cross_flops", "kv_cache_bytes", "score_bytes")
ARGS = {"shapes": ("b", "s", "d", "h"), "params": ("d", "h", "bias"), "gqa_params": ("d", "h", "g", "bias"),
        "flops": ("b", "s", "d", "h"), "cross_flops": ("b", "s_q", "s_k", "d", "h"),
        "kv_cache_bytes": ("b", "t", "n_layers", "h", "g", "d_k", "bytes_per_elem"),
        "score_bytes": ("b", "h", "s_q", "s_k", "bytes_per_elem")}
SHAPE_KEYS = ("X", "Q", "K", "V", "Q_heads", "K_heads", "V_heads", "scores", "weights", "context", "merged",
              "output")
HEADS = (1, 2, 3, 4, 6, 8, 12, 16, 32)
HEAD_WIDTHS = (1, 2, 4, 8, 16, 64, 128)


# -- configurations ---------------------------------------------------------------------------------------
def config(rng, *, big: bool = False, **fixed) -> dict:
    """One seeded configuration with every argument any function takes (``fixed`` overrides). ``big``: sizes
    whose counts need more than 64 bits."""
    def pick(options):
        return int(options[int(rng.integers(0, len(options)))])

    if big:
        h = 2 ** int(rng.integers(4, 11))
        d_k = 2 ** int(rng.integers(7, 13))
        draw = {"b": int(rng.integers(2 ** 16, 2 ** 21)), "s": int(rng.integers(2 ** 20, 2 ** 25)),
                "t": int(rng.integers(2 ** 20, 2 ** 25)), "n_layers": int(rng.integers(64, 1025))}
        draw["s_q"], draw["s_k"] = int(rng.integers(2 ** 20, 2 ** 25)), int(rng.integers(2 ** 20, 2 ** 25))
    else:
        h, d_k = pick(HEADS), pick(HEAD_WIDTHS)
        draw = {"b": int(rng.integers(1, 17)), "s": int(rng.integers(2, 4097)), "t": int(rng.integers(1, 8193)),
                "n_layers": int(rng.integers(1, 97)), "s_q": int(rng.integers(1, 2049)),
                "s_k": int(rng.integers(1, 2049))}
    h = fixed.get("h", h)
    d_k = fixed.get("d_k", d_k if "d" not in fixed else fixed["d"] // h)
    divisors = [x for x in range(1, h + 1) if h % x == 0]
    draw.update(h=h, d_k=d_k, d=h * d_k, g=pick(divisors), bytes_per_elem=pick((1, 2, 4, 8)),
                bias=bool(rng.integers(0, 2)))
    draw.update(fixed)
    return draw


def arguments(function: str, values: dict) -> dict:
    """The arguments ``function`` takes, from a configuration; one set to None is left out (its default)."""
    return {a: values[a] for a in ARGS[function] if values.get(a) is not None}


def expected(function: str, args: dict) -> object:
    return getattr(cost_oracle, function)(**args, bugs=())


def call_text(function: str, values: dict) -> str:
    return f"{function}({', '.join(f'{a}={values[a]!r}' for a in ARGS[function] if a in values)})"


# -- what came back ---------------------------------------------------------------------------------------
def type_name(value: object) -> str:
    opaque = getattr(value, "type", None)
    return opaque if isinstance(opaque, str) and hasattr(value, "text") else type(value).__name__


def describe(value: object, limit: int = 120) -> str:
    text = getattr(value, "text", None) if hasattr(value, "type") else None
    shown = text if isinstance(text, str) else repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "..."


def type_problem(value: object) -> str | None:
    """Why ``value`` is not an exact Python int, for the candidate; None when it is one."""
    kind = type_name(value)
    if type(value) is int:
        return None
    if type(value) is bool:
        return f"a bool ({value}); counts must be Python ints"
    if type(value) is float:
        return (f"a float ({value!r}); counts must be exact Python ints, and a float cannot hold every large "
                "count exactly (in Python d / h is a float, d // h an int)")
    if hasattr(value, "bits"):
        return f"{value.text}, far beyond any count here"
    if kind.startswith("numpy."):
        return f"a {kind} ({describe(value)}); counts must be plain Python ints: convert it with int(...)"
    return f"a {kind} ({describe(value)}), not an int"


def as_number(value: object) -> object:
    """For the diagnosis: the number a wrongly typed count stands for (an integral float, a NumPy integer's
    text), so that a mistake in the formula is still named; None when there is none."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    text = getattr(value, "text", None)
    if isinstance(text, str) and type_name(value).startswith("numpy.") and text.lstrip("-").isdigit():
        return int(text)
    if isinstance(value, tuple):
        items = [as_number(v) for v in value]
        return None if any(v is None for v in items) else tuple(items)
    if isinstance(value, dict):
        items = {k: as_number(v) for k, v in value.items()}
        return None if any(v is None for v in items.values()) else items
    return None


def shape_problem(value: object, want: dict) -> str | None:
    """Why ``value`` is not the shapes dict ``want``; None when it is exactly that."""
    if type(value) is not dict:
        return f"returned a {type_name(value)}, expected a dict of shapes"
    keys = [k for k in value if isinstance(k, str)]
    missing = [k for k in want if k not in value]
    extra = sorted(str(k) for k in value if k not in want)
    if missing or extra or len(keys) != len(value):
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unexpected {', '.join(extra)}"]
                                                                          if extra else [])
        return f"the dict's keys are wrong: {'; '.join(parts)} (exactly {', '.join(want)} are expected)"
    for key, shape in want.items():
        got = value[key]
        if type(got) is not tuple:
            what = "a list" if type(got) is list else f"a {type_name(got)}"
            return f"{key} is {what} ({describe(got)}), expected a tuple of ints"
        for n in got:
            problem = type_problem(n)
            if problem:
                return f"{key} = {describe(got)} holds {problem}"
        if got != shape:
            return f"{key} is {got}, expected {shape}"
    return None


# -- checks -----------------------------------------------------------------------------------------------
def check_calls(candidate, record, function: str, configs: list[dict]) -> None:
    """Call ``function`` on every configuration, record each answer for the diagnosis, and fail on the first
    wrong one (type or value), saying how many were wrong."""
    failures = []
    for config_ in configs:
        values = arguments(function, config_)
        want = expected(function, values)
        got = candidate.call_function(function, values).value
        if function == "shapes":
            problem = shape_problem(got, want)
        else:
            problem = type_problem(got)
            problem = f"returned {problem}" if problem else (
                None if got == want else f"returned {got}, expected {want}")
        record.signature("value", function=function, values=values, value=got, passed=problem is None)
        if problem:
            failures.append((values, problem, got, want))
    if failures:
        values, problem, got, want = failures[0]
        more = f" ({len(failures)} of {len(configs)} configurations wrong)" if len(configs) > 1 else ""
        raise CheckFailure(f"{call_text(function, values)} {problem}{more}" if function != "shapes" else
                           f"{call_text(function, values)}: {problem}{more}",
                           {"function": function, "wrong": len(failures), "checked": len(configs),
                            "returned_type": type_name(got)})


# -- the candidate kit's hook -----------------------------------------------------------------------------
def public_examples() -> list[dict]:
    """The worked examples a candidate may see: exercise.json's ``public.calls`` (the prompt's own numbers),
    each with its answer: {function, args (name -> int/bool), expected}. Plain JSON-able values (ints within
    64 bits; a shapes dict's tuples become lists in JSON). For the candidate kit's public vectors, which for a
    "functions" track are JSON rather than .npz."""
    from harness.core.exercises import get_exercise

    public = get_exercise("attention_cost").public.get("calls", [])
    return [{"function": c["function"], "args": dict(c["args"]), "expected": expected(c["function"], c["args"])}
            for c in public]
