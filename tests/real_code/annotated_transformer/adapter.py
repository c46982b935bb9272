# Glue (not part of the source): the exercise's names and argument order, dropout off, the mask shaped as the
# notebook's (b, s_q, s_k) masks are (its mask convention left as it is: a candidate who did not notice it).
class MultiHeadAttention(MultiHeadedAttention):
    def __init__(self, d_model, n_heads):
        super().__init__(n_heads, d_model, dropout=0.0)

    def forward(self, x, mask=None):
        if mask is not None:
            mask = torch.broadcast_to(mask, (x.shape[0], 1, x.shape[1], x.shape[1]))[:, 0]
        return super().forward(x, x, x, mask=mask)
