# Glue (not part of the source): the exercise's constructor (a config with dropout off and GPT-2's biases). The
# module is causal by construction and takes no mask: the glue has nowhere to put it.
class MaskedMultiHeadAttention(CausalSelfAttention):
    def __init__(self, d_model, n_heads):
        super().__init__(GPTConfig(block_size=1024, n_embd=d_model, n_head=n_heads, dropout=0.0, bias=True))

    def forward(self, x, mask):
        return super().forward(x)
