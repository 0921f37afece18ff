"""Cross-entropy of a batch of logits against one-hot targets, through logsumexp.

    loss = mean_n( logsumexp_c(logits[n, c]) - sum_c(targets[n, c] * logits[n, c]) )

`logsumexp` subtracts the row maximum before exp, so no logit overflows; the shift carries
no gradient (it cancels exactly). The generated backward is the familiar
(softmax(logits) - targets) / N, derived rather than written.
"""
import numpy as np

import symgrad as sg


class CrossEntropy(sg.Function):
    @staticmethod
    def forward(ctx, logits, targets):
        per_row = logits.logsumexp(1) - (targets * logits).sum(1)
        return per_row.mean()

    @staticmethod
    def example_inputs():
        rng = np.random.default_rng(0)
        logits = rng.standard_normal((4, 5))
        targets = np.eye(5)[[0, 3, 1, 4]]
        return (logits, targets)


if __name__ == "__main__":
    from symgrad.cli.gradcheck import check

    logits, targets = CrossEntropy.example_inputs()
    module = sg.compile(CrossEntropy, logits, targets)
    print(module.source)
    (grad_logits, _) = module.backward(np.float64(1.0), logits, targets)
    softmax = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    print("matches (softmax - targets) / N:",
          np.allclose(grad_logits, (softmax - targets) / len(logits)))
    raise SystemExit(0 if check(module, logits, targets) else 1)
