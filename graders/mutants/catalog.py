"""The bug vocabulary (fixed ids), what each means to a candidate, and where each applies."""

from __future__ import annotations

import dataclasses

ALL_EXERCISES = ("mha", "masked_mha", "cross_attention", "gqa")
BOTH = ("numpy", "torch")


@dataclasses.dataclass(frozen=True)
class Bug:
    id: str
    summary: str
    hint: str
    exercises: tuple = ALL_EXERCISES
    tracks: tuple = BOTH
    detector: str = "numeric"          # numeric: outputs match the mutant | dtype | mutation | memory: a signature
    #                                    | value: plain answers match the mutant's (python track) | type

    def applies(self, exercise: str, track: str) -> bool:
        return exercise in self.exercises and track in self.tracks


CATALOG: tuple[Bug, ...] = (
    Bug("scale_sqrt_d", "your output matches the reference with scores scaled by 1/sqrt(d) instead of 1/sqrt(d_k)",
        "divide Q·Kᵀ by sqrt(d_k), where d_k = d / h is the size of one head, not the model width d"),
    Bug("no_scale", "your output matches attention whose scores were never scaled by 1/sqrt(d_k)",
        "divide Q·Kᵀ by sqrt(d_k) before the softmax"),
    Bug("split_without_transpose",
        "your output matches heads split with reshape(b, h, s, d_k) instead of reshape(b, s, h, d_k) + transpose",
        "reshape to (b, s, h, d_k) first, then swap the s and h axes; a direct reshape mixes tokens and heads"),
    Bug("merge_without_transpose",
        "your output matches heads merged with reshape(b, s, d) straight from (b, h, s, d_k)",
        "transpose the context back to (b, s, h, d_k) before reshaping it to (b, s, d)"),
    Bug("softmax_wrong_axis", "your output matches a softmax over the query axis instead of the key axis",
        "normalise each query's scores over the keys: softmax over the last axis of (b, h, s_q, s_k)"),
    Bug("missing_output_projection", "your output matches the concatenated heads without the output projection W_O",
        "multiply the merged context by W_O (torch: apply w_o)"),
    Bug("transposed_weights", "your output matches projections computed with the weights transposed (X @ W.T)",
        "the contract is Q = X @ Wq with W of shape (d_in, d_out); in torch use the nn.Linear itself",
        exercises=("mha", "masked_mha", "cross_attention")),
    Bug("mask_inverted", "your output matches the mask read the wrong way round (True treated as 'may attend')",
        "True in the mask means the key may NOT be attended: fill those scores with -inf"),
    Bug("mask_after_softmax", "your output matches masked weights zeroed after the softmax, without renormalising",
        "apply the mask to the scores before the softmax so each row still sums to 1"),
    Bug("masked_rows_nan", "fully-masked query rows come out as NaN (a softmax over a row of -inf)",
        "detect rows whose keys are all masked and give them a zero context instead of NaN"),
    Bug("masked_rows_mean_v",
        "fully-masked query rows return the mean of V (a large negative fill makes their weights uniform)",
        "a query with no visible key must get a zero context: zero its weights after the softmax"),
    Bug("causal_excludes_diagonal", "your output matches a causal mask that also hides each token from itself",
        "a causal mask hides only future keys: triu(..., k=1), so the diagonal stays visible",
        exercises=("masked_mha",)),
    Bug("no_max_subtraction", "the softmax overflows for large scores: the row max is not subtracted first",
        "compute softmax(s) as exp(s - max(s)) / sum(exp(s - max(s))) along the key axis"),
    Bug("dtype_promoted", "float32 inputs come back as float64: something promoted the computation",
        "keep every constant in the input's dtype (e.g. np.float32 scalars, or cast the result back)",
        detector="dtype"),
    Bug("bias_ignored", "your output matches the reference with the projection biases left out",
        "apply each nn.Linear as a whole (weight and bias), e.g. self.w_q(x)", tracks=("torch",)),
    Bug("gqa_tiled_heads", "your output matches key/value groups repeated with tile (head i reads group i % g)",
        "query head i must use group i // (h // g): repeat_interleave along the head axis, not repeat/tile",
        exercises=("gqa",)),
    Bug("cross_kv_from_queries", "your output matches keys and values computed from X instead of the context Y",
        "in cross-attention only the queries come from X; keys and values come from the context",
        exercises=("cross_attention",)),
    Bug("input_mutated", "an argument was modified in place", "work on copies; never write into X, the weights or the mask",
        detector="mutation"),
)

# kv_cache (issue 15): the generic mistakes a decoding call can make, then the cache's own.
KV_GENERIC = ("scale_sqrt_d", "no_scale", "split_without_transpose", "merge_without_transpose", "softmax_wrong_axis",
              "missing_output_projection", "no_max_subtraction", "dtype_promoted", "bias_ignored", "gqa_tiled_heads",
              "input_mutated")
KV = ("kv_cache",)
KV_BUGS = (
    Bug("kv_cache_repeated_heads", "the cache stores the h repeated query heads instead of the g key/value groups",
        "cache K and V as computed, (b, g, t, d_k); repeat them for the query heads only inside the attention",
        exercises=KV),
    Bug("kv_mask_from_zero", "your output matches a causal mask anchored at position 0 instead of after the prefix",
        "new token i sits at position t0 + i: it may see keys 0..t0 + i, e.g. triu(ones(s, t), k=t0 + 1)",
        exercises=KV),
    Bug("kv_no_causal_mask", "your output matches new tokens attending to every new token, later ones included",
        "several new tokens in one call (a prefill) still need a causal mask among themselves", exercises=KV),
    Bug("kv_prefix_ignored", "your output matches new tokens attending only among themselves: the cache is unused",
        "concatenate the cached K and V before the new tokens' and attend over all of them", exercises=KV),
    Bug("kv_cache_stale", "the returned cache is the old one: the new tokens' keys and values were never added",
        "return the concatenation of the old cache and the new K, V (prefix first)", exercises=KV),
    Bug("kv_cache_new_only", "the returned cache holds only the new tokens' keys and values, not the prefix",
        "return the concatenation of the old cache and the new K, V (prefix first)", exercises=KV),
    Bug("kv_cache_swapped", "the returned cache has keys and values swapped: (V, K) instead of (K, V)",
        "return (K, V) in that order, the keys first", exercises=KV),
)
CATALOG = tuple(dataclasses.replace(b, exercises=b.exercises + KV) if b.id in KV_GENERIC else b
                for b in CATALOG) + KV_BUGS

FLASH = ("flash_attention",)
FLASH_SHARED = ("no_scale", "no_max_subtraction", "causal_excludes_diagonal", "dtype_promoted", "input_mutated")
CATALOG = tuple(dataclasses.replace(b, exercises=b.exercises + FLASH) if b.id in FLASH_SHARED else b
                for b in CATALOG) + (
    Bug("flash_no_rescale_acc",
        "your output matches an online softmax whose accumulator is not rescaled when the running max grows",
        "when a block raises a query's running max from m_old to m_new, multiply the accumulated exp(s - m)·V by "
        "exp(m_old - m_new) before adding the block's share", exercises=FLASH),
    Bug("flash_no_rescale_sum",
        "your output matches an online softmax whose running sum (the normaliser) is not rescaled when the "
        "running max grows", "rescale the running sum l by exp(m_old - m_new) too, exactly like the accumulator",
        exercises=FLASH),
    Bug("flash_no_final_divide", "your output matches the accumulator never divided by the running sum",
        "finish with acc / l: the accumulator holds sum(exp(s - m)·V), not yet normalised", exercises=FLASH),
    Bug("flash_last_block_dropped",
        "your output matches attention that skips the last, partial block of keys (s_k not a multiple of the block)",
        "loop over range(0, s_k, block_size) and slice start:start + block_size: the last block may be shorter",
        exercises=FLASH),
    Bug("flash_causal_block_local",
        "your output matches a causal mask built from each key's position within its block instead of in the sequence",
        "compare query position i with the key's global position start + j, not with j", exercises=FLASH),
    Bug("flash_causal_bottom_right",
        "your output matches causal masking aligned bottom-right (query i sees keys j <= i + s_k - s_q)",
        "the contract aligns top-left, as SDPA's is_causal=True: query i sees keys j <= i whatever s_q and s_k",
        exercises=FLASH),
    Bug("flash_full_scores",
        "the call's peak memory grows like s²: a full (s_q, s_k) matrix (scores, weights or a mask) was materialised",
        "compute the scores one block of keys at a time, (s_q, block_size) tiles folded into the running max, sum "
        "and accumulator; build the causal mask per block too", exercises=FLASH, detector="memory"),
)

# attention_cost (issue 26): the python track's plain counts. "value": the mutant's answer (graders/common/
# cost_oracle.py with the bug switched on) equals the candidate's on every call of a function it got wrong;
# "type": a count came back as a float.
COST = ("attention_cost",)
PY = ("python",)
CATALOG = CATALOG + tuple(Bug(*fields, exercises=COST, tracks=PY, detector="value") for fields in (
    ("cost_bias_forgotten", "your parameter count leaves out the biases (bias=True)",
     "with bias=True each projection also has a bias vector as long as its output: d for W_q and W_o, g·d_k for "
     "W_k and W_v"),
    ("cost_bias_per_head", "your parameter count has the biases once per head",
     "a bias belongs to a projection (one vector of its output width, shared by every head), not to each head"),
    ("cost_params_grow_with_h", "your count grows with the number of heads: every head given full-width (d, d) "
     "projections", "the heads split the columns of W_q, W_k, W_v (h heads of width d_k = d / h), so the "
     "parameters (and the projections' FLOPs) are the same for any h"),
    ("cost_madd_one_flop", "your FLOP count counts a multiply-add as 1 FLOP",
     "a multiply-add is 2 FLOPs: an (m, k) x (k, n) product costs 2·m·k·n"),
    ("cost_wo_forgotten", "your count leaves out the output projection W_o",
     "after merging the heads the output is merged @ W_o: d² more parameters (+ d bias) and 2·b·s·d² more FLOPs"),
    ("cost_s_squared_missing", "your FLOP count has no term in s²: the attention products are missing",
     "add the attention itself: Q·Kᵀ and weights·V cost 2·b·h·s_q·s_k·d_k FLOPs each"),
    ("cost_s_squared_once", "your FLOP count has only one of the two attention products (Q·Kᵀ or weights·V)",
     "both Q·Kᵀ and weights·V cost 2·b·h·s_q·s_k·d_k FLOPs: 4·b·s_q·s_k·d together"),
    ("cost_cross_kv_over_sq", "your cross-attention count projects keys and values over the s_q query tokens",
     "in cross-attention K = Y W_k and V = Y W_v run over the s_k context tokens; only W_q and W_o run over s_q"),
    ("cost_gqa_kv_with_h", "your GQA count gives W_k and W_v h heads instead of g groups",
     "in GQA W_k and W_v produce g groups of width d_k: (d, g·d_k) each, so fewer parameters than MHA when g < h"),
    ("cost_kv_no_factor_two", "your KV cache holds only one tensor: the factor 2 for K and V is missing",
     "the cache keeps both K and V, each (b, g, t, d_k) per layer"),
    ("cost_kv_per_query_head", "your KV cache is sized per query head (h) instead of per key/value group (g)",
     "the cache stores K and V as computed, g groups of width d_k; that is what GQA/MQA save (h / g times less)"),
    ("cost_elements_not_bytes", "your byte count is a number of elements: bytes_per_elem is missing",
     "multiply the number of elements by bytes_per_elem (2 for fp16/bf16, 4 for fp32)"),
    ("cost_scores_without_heads", "your score tensor has no head axis: (b, s, s) instead of (b, h, s, s)",
     "every head has its own scores: (b, h, s_q, s_k), h times the elements of one head's"),
    ("cost_dk_as_d", "your count takes the head width d_k as the model width d",
     "a head is d_k = d / h wide: Q_heads is (b, h, s, d_k), and the h heads' attention together costs what "
     "one head of width d would"),
    ("cost_heads_not_transposed", "your split heads are (b, s, h, d_k): the head axis is not moved before s",
     "after reshaping to (b, s, h, d_k) the heads are transposed to (b, h, s, d_k) so each head's scores are "
     "(s, s)"),
)) + (Bug("cost_float_counts", "your counts come back as floats (d / h is a float in Python)",
          "use integer division, d_k = d // h, and keep every count an int: a float cannot hold large counts "
          "exactly", exercises=COST, tracks=PY, detector="type"),)

# Issue 29: deviations the grader grades around (each charged once, by the tests that exist for it).
TORCH_MODULES = ALL_EXERCISES + KV
CATALOG += (
    Bug("precision_lowered",
        "part of the attention runs in a lower precision than the input: float64 outputs agree with the reference "
        "only to float32 precision (e.g. a softmax computed in float32), or come back as float32",
        "keep every intermediate in the input's dtype: no .float() around the softmax (or cast back before "
        "multiplying by V), no float32 buffers or constants in a float64 call",
        exercises=TORCH_MODULES + FLASH, detector="precision"),
    *(Bug(f"missing_bias_{p}", f"the {name} projection has no bias: bias=True (the default) asks for one on every "
          "projection; the other tests graded it with that bias held at zero",
          f"build {layer} as nn.Linear(..., bias=bias) like the other projections",
          exercises=TORCH_MODULES, tracks=("torch",), detector="structure")
      for p, name, layer in (("q", "query", "W_Q"), ("k", "key", "W_K"), ("v", "value", "W_V"),
                             ("o", "output", "W_O"))),
    Bug("constructor_without_bias", "the constructor does not accept the bias keyword (it raised for bias=False)",
        "take bias as the contract's constructor does, e.g. __init__(self, d_model, n_heads, bias=True), and pass "
        "it to every nn.Linear", exercises=TORCH_MODULES, tracks=("torch",), detector="structure"),
    Bug("extra_bias", "bias=False still builds projection biases (graded with them held at zero)",
        "pass bias=bias to every nn.Linear", exercises=TORCH_MODULES, tracks=("torch",), detector="structure"),
    Bug("layout_renamed",
        "the parameters are named differently from the contract; the grader recognised the layout and graded it",
        "name the projections w_q, w_k, w_v, w_o (mha and masked_mha also accept a fused qkv plus w_o)",
        exercises=TORCH_MODULES, tracks=("torch",), detector="structure"),
)

BUGS = {b.id: b for b in CATALOG}


def applicable(exercise: str, track: str) -> list[Bug]:
    return [b for b in CATALOG if b.applies(exercise, track)]
