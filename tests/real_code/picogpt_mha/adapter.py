# Glue (not part of the source): the exercise's batched signature over picoGPT's per-sequence mha (its weights
# are already (d_in, d_out), as the contract's), zero biases. picoGPT's mha is causal by construction and takes no
# mask: the glue has nowhere to put it.
def masked_mha(X, Wq, Wk, Wv, Wo, h, mask):
    c_attn = {"w": np.concatenate([Wq, Wk, Wv], axis=1), "b": np.zeros(3 * X.shape[-1], X.dtype)}
    c_proj = {"w": Wo, "b": np.zeros(X.shape[-1], X.dtype)}
    return np.stack([mha(x, c_attn, c_proj, h) for x in X])
