"""attention_cost (issue 26): the python track end to end — plain values across the wire (tagged JSON, ints
exact however large, types named faithfully), the registry's tracks, the suite's messages for wrong types, the
diagnosis of mistakes in several functions at once, and the public examples for the candidate kit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graders.common import cost, cost_oracle
from graders.mutants.build import write_mutant
from harness.core import exercises
from harness.core.errors import UsageError
from harness.grading.engine import grade
from harness.grading.submission import Submission, detect_track
from harness.session.channel import _checked_header
from harness.worker import wire
from tests.helpers import validate, write

REFERENCE = exercises.REFERENCE_DIR / "attention_cost_python.py"


# -- the registry ---------------------------------------------------------------------------------------
def test_tracks_come_from_exercise_json():
    assert exercises.TRACKS == wire.TRACKS and exercises.MODULE_ENTRY == wire.MODULE_ENTRY
    ex = exercises.get_exercise("attention_cost")
    assert ex.track_names == ("python",) and ex.default_track == "python"
    assert ex.entry("python") == wire.MODULE_ENTRY
    assert ex.entry_label("python") == ", ".join(cost.FUNCTIONS)
    assert {n: f["args"] + f.get("kwargs", []) for n, f in ex.functions("python").items()} == \
        {n: list(a) for n, a in cost.ARGS.items()}
    with pytest.raises(UsageError, match="has no 'numpy' track; choose python"):
        exercises.check_track("numpy", ex)
    with pytest.raises(UsageError, match="unknown track 'jax'"):
        exercises.check_track("jax")
    mha = exercises.get_exercise("mha")
    assert mha.track_names == ("numpy", "torch") and mha.functions("numpy") == {}
    # a one-track exercise is that track whatever the file looks like
    assert detect_track(Submission(REFERENCE, "import torch\n", "", 13), ex) == "python"


def test_bug_ids_fit_the_report_schema():
    import re

    from graders.mutants.catalog import applicable
    from harness.core.report import load_schema

    pattern = load_schema()["properties"]["diagnosis"]["items"]["properties"]["bug"]["pattern"]
    ids = [b.id for b in applicable("attention_cost", "python")]
    assert len(ids) == 16 and all(re.fullmatch(pattern, i) for i in ids), ids


# -- values on the wire ---------------------------------------------------------------------------------
class MyInt(int):
    pass


def test_values_cross_exactly_with_their_types():
    big = 3 ** 200
    value = {"n": big, "neg": -7, "f": 1.5, "b": True, "none": None, "shape": (2, 4, 8), "list": [1, 2],
             "np": np.int64(5), "sub": MyInt(3), ("k", 1): "text"}
    tree = wire.encode_value(value)
    back = wire.decode_value(json.loads(json.dumps(tree, allow_nan=False)))
    assert back["n"] == big and type(back["n"]) is int
    assert type(back["f"]) is float and back["b"] is True and back["none"] is None
    assert type(back["shape"]) is tuple and back["shape"] == (2, 4, 8) and type(back["list"]) is list
    assert isinstance(back["np"], wire.Opaque) and (back["np"].type, back["np"].text) == ("numpy.int64", "5")
    assert isinstance(back["sub"], wire.Opaque) and back["sub"].type.endswith("MyInt")
    assert back[("k", 1)] == "text"
    huge = wire.decode_value(wire.encode_value(1 << 10_000))
    assert isinstance(huge, wire.BigInt) and huge.bits == 10_001
    nan = wire.decode_value(json.loads(json.dumps(wire.encode_value(float("nan")))))
    assert nan != nan


def test_values_past_the_caps_are_refused_by_the_worker():
    deep: list = []
    for _ in range(wire.MAX_VALUE_DEPTH + 2):
        deep = [deep]
    with pytest.raises(wire.WireError, match="nested"):
        wire.encode_value(deep)
    with pytest.raises(wire.WireError, match="items"):
        wire.encode_value(list(range(wire.MAX_VALUE_NODES + 5)))


@pytest.mark.parametrize("tree", [
    {"int": "1.5"}, {"int": 5}, {"int": "٣"}, {"int": "--1"}, {"int": ""}, {"int": "9" * (wire.MAX_INT_DIGITS + 1)},
    {"bool": 1}, {"float": "abc"}, {"none": False}, {"tuple": {"a": 1}}, {"dict": [[{"list": []}, {"none": True}]]},
    {"dict": [[{"none": True}]]}, {"int": "1", "bool": True}, {"other": 3, "text": "x"}, {"big_int": -1}, [1], "1",
    {"tuple": [{"int": "1"}] * (wire.MAX_VALUE_NODES + 2)}])
def test_a_forged_value_tree_is_a_malformed_frame(tree):
    with pytest.raises(wire.WireError):
        _checked_header({"kind": "result", "value": tree})


# -- grading --------------------------------------------------------------------------------------------
def test_reference_passes_and_stub_fails():
    report = grade(exercise="attention_cost", submission=REFERENCE, sandbox="local")
    validate(report.to_dict())
    assert report.track == "python" and report.verdict == "passed" and report.score == report.max_score > 0
    assert {t.category for t in report.tests} == {"shape", "numeric", "edge"}
    stub = grade(exercise="attention_cost", submission=exercises.get_exercise("attention_cost").stub_path("python"),
                 sandbox="local")
    assert stub.verdict == "failed" and stub.score == 0 and stub.diagnosis == []
    assert all(t.status == "error" and "NotImplementedError" in t.message for t in stub.tests)


WRONG_TYPES = '''
import numpy as np

def shapes(b, s, d, h):
    d_k = d // h
    return {"X": [b, s, d], "Q": (b, s, d), "K": (b, s, d), "V": (b, s, d), "Q_heads": (b, h, s, d_k),
            "K_heads": (b, h, s, d_k), "V_heads": (b, h, s, d_k), "scores": (b, h, s, s), "weights": (b, h, s, s),
            "context": (b, h, s, d_k), "merged": (b, s, d), "output": (b, s, d)}

def params(d, h, bias=True):
    return float(4 * d * d + 4 * d * bias)

def gqa_params(d, h, g, bias=True):
    return np.int64(2 * d * d + 2 * d * g * (d // h) + bias * (2 * d + 2 * g * (d // h)))

def flops(b, s, d, h):
    return True

def cross_flops(b, s_q, s_k, d, h):
    return str(4 * b * s_q * d * d + 4 * b * s_k * d * d + 4 * b * s_q * s_k * d)

def kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem):
    return 2 * b * t * n_layers * g * d_k * bytes_per_elem

def score_bytes(b, h, s_q, s_k, bytes_per_elem):
    return b * h * s_q * s_k * bytes_per_elem
'''


def test_wrong_types_fail_with_a_clear_message(tmp_path):
    report = grade(exercise="attention_cost", submission=write(tmp_path, "types.py", WRONG_TYPES), sandbox="local")
    by_id = {t.id: t for t in report.tests}
    assert "X is a list ([" in by_id["test_shapes"].message and "expected a tuple of ints" in by_id["test_shapes"].message
    assert "returned a float (" in by_id["test_params"].message and "d // h" in by_id["test_params"].message
    assert "returned a numpy.int64 (" in by_id["test_gqa_params"].message
    assert "int(...)" in by_id["test_gqa_params"].message
    assert "returned a bool (True)" in by_id["test_flops"].message
    assert "returned a str (" in by_id["test_cross_flops"].message
    assert by_id["test_kv_cache_bytes"].status == by_id["test_score_bytes"].status == "passed"
    # the right numbers in the wrong types: the float is named, no formula mistake is guessed
    assert [d.bug for d in report.diagnosis] == ["cost_float_counts"]
    assert report.diagnosis[0].evidence["functions"] == ["params"]


def test_mistakes_in_several_functions_are_all_named(tmp_path):
    path = write_mutant(tmp_path, "attention_cost", "python",
                        {"cost_bias_forgotten", "cost_madd_one_flop", "cost_kv_no_factor_two",
                         "cost_elements_not_bytes"})
    report = grade(exercise="attention_cost", submission=path, sandbox="local")
    named = {d.bug: d.evidence for d in report.diagnosis}
    assert set(named) == {"cost_bias_forgotten", "cost_madd_one_flop", "cost_kv_no_factor_two",
                          "cost_elements_not_bytes"}
    assert named["cost_madd_one_flop"]["functions"] == ["flops", "cross_flops"]
    # kv_cache_bytes has two mistakes at once (a pair explains it); score_bytes only one
    assert named["cost_kv_no_factor_two"] == dict(named["cost_kv_no_factor_two"], functions=["kv_cache_bytes"],
                                                together_with="cost_elements_not_bytes")
    assert sorted(named["cost_elements_not_bytes"]["functions"]) == ["kv_cache_bytes", "score_bytes"]


def test_a_missing_function_fails_only_its_own_tests(tmp_path):
    source = REFERENCE.read_text().replace("def score_bytes(", "def score_bytes_(")
    report = grade(exercise="attention_cost", submission=write(tmp_path, "partial.py", source), sandbox="local")
    failing = {t.id: t for t in report.tests if t.status != "passed"}
    assert set(failing) == {"test_score_bytes", "test_corner_configurations[score_bytes]",
                            "test_big_integers[score_bytes]"}
    assert all("defines no function 'score_bytes'" in t.message for t in failing.values())


# -- the candidate kit's hook ---------------------------------------------------------------------------
def test_public_examples_are_plain_json_and_right():
    examples = cost.public_examples()
    assert json.loads(json.dumps(examples)) == json.loads(json.dumps(examples))
    assert {e["function"] for e in examples} >= {"shapes", "params"}
    reference = _reference_module()
    for e in examples:
        assert getattr(cost_oracle, e["function"])(**e["args"]) == e["expected"]
        assert getattr(reference, e["function"])(**e["args"]) == e["expected"]
    assert {"function": "params", "args": {"d": 512, "h": 8, "bias": True}, "expected": 1_050_624} in examples


HOSTILE = '''
class Loud:
    def __str__(self):
        raise SystemExit("no")

def shapes(b, s, d, h):
    x = []
    x.append(x)
    return x

def params(d, h, bias=True):
    return list(range(10 ** 6))

def gqa_params(d, h, g, bias=True):
    return Loud()

def flops(b, s, d, h):
    return 1 << 100_000
'''


def test_hostile_values_are_the_candidates_failures(tmp_path):
    report = grade(exercise="attention_cost", submission=write(tmp_path, "hostile.py", HOSTILE), sandbox="local")
    validate(report.to_dict())
    by_id = {t.id: t for t in report.tests}
    assert report.verdict == "failed" and report.score == 0
    assert by_id["test_shapes"].status == "error" and "nested more than" in by_id["test_shapes"].message
    assert by_id["test_params"].status == "error" and "more than 512 items" in by_id["test_params"].message
    assert "a submission.Loud (<unprintable>), not an int" in by_id["test_gqa_params"].message
    assert "an integer of 100001 bits" in by_id["test_flops"].message


def _reference_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_cost_reference", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
