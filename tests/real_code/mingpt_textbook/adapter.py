# Glue (not part of the source): the exercise's constructor (a config, dropout off) and the exercise's mask put
# where the module reads its mask, the "bias" buffer, as it is (a candidate who did not notice that the buffer
# marks what may be attended); no mask: nothing hidden.
class MultiHeadAttention(CausalSelfAttention):
    def __init__(self, d_model, n_heads):
        config = types.SimpleNamespace(n_embd=d_model, n_head=n_heads, attn_pdrop=0.0, resid_pdrop=0.0,
                                       block_size=1024)
        super().__init__(config)

    def forward(self, x, mask=None):
        T = x.shape[1]
        if mask is None:
            mask = torch.ones(T, T)
        while mask.dim() < 4:
            mask = mask.unsqueeze(0)
        self.bias = mask
        return super().forward(x)
