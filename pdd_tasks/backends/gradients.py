"""GradNorm's per-text values from the HF backend: the norms of the gradient of a text's loss with
respect to each of the model's parameter tensors.

MIMIR's gradient-norm attack (``mimir/attacks/gradnorm.py``) takes the text's mean loss
``-(1/n) sum_i log p(x_i | x_<i)``, calls ``backward()`` and reads ``param.grad.norm(p)`` of every
parameter that got a gradient. Here the same gradient is taken with ``torch.autograd.grad``, which
returns it without writing ``.grad`` into the model (the run's model is left as it was), for one
text at a time (a per-text gradient cannot be batched), and the norms of every tensor are returned
for p = 1, 2 and infinity (:data:`pdd_metrics.GRADIENT_NORM_ORDERS`), so that the task's
``gradnorm_p`` picks one when it scores. The score itself is :func:`pdd_metrics.gradnorm_score`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pdd_metrics.gradnorm import GRADIENT_NORM_ORDERS
from pdd_tasks.backends.base import EncodedText
from pdd_tasks.errors import UserError


class NoGradientError(UserError):
    """The model has no weight that takes a gradient (all frozen), so GradNorm has nothing to measure."""


def gradient_norms(model, item: EncodedText, device) -> np.ndarray:
    """``||d L(x) / d w_t||_p`` for each parameter tensor ``w_t`` of ``model`` that takes a gradient,
    for p = 1, 2, inf: one forward and one backward pass of the text ``item``.

    Args:
        model: a causal HF model (``HFLM.model``), in eval mode as HFLM loads it.
        item: the encoded text: the start (``item.context``) and the scored tokens (``item.tokens``),
            as the log-prob capture scores them.
        device: where the token ids go (``HFLM.device``).

    Returns:
        float64 array of shape (3, T): rows p = 1, 2, inf; one column per parameter tensor with a
        gradient, in ``model.parameters()`` order (tied weights once). Each norm is computed in
        float32; the loss is the mean over the scored tokens of ``-log_softmax`` in float32.

    Raises:
        NoGradientError: no parameter requires a gradient, or none received one.
    """
    weights = [weight for weight in model.parameters() if weight.requires_grad]
    if not weights:
        raise NoGradientError(
            "GradNorm: no weight of the model requires a gradient (all are frozen, as in a model quantized to 4 or 8 "
            "bits), so there is no gradient to measure. Load the model in a float dtype with its weights trainable "
            "(--model_args dtype=float32), or drop gradnorm from --metadata."
        )
    ids = torch.tensor([(item.context + item.tokens)[:-1]], dtype=torch.long, device=device)
    targets = torch.tensor(item.tokens, dtype=torch.long, device=device)
    with torch.enable_grad():
        logits = model(ids).logits[0, -len(item.tokens) :]  # the predictions of x_1..x_n
        logprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32).gather(-1, targets[:, None])
        grads = torch.autograd.grad(-logprobs.mean(), weights, allow_unused=True)
    present = [grad for grad in grads if grad is not None]
    if not present:
        raise NoGradientError("GradNorm: the text's loss reached no weight of the model; there is no gradient.")
    with torch.no_grad():
        rows = [
            torch.stack([torch.linalg.vector_norm(grad, ord=p, dtype=torch.float32).cpu() for grad in present])
            for p in GRADIENT_NORM_ORDERS
        ]
    return torch.stack(rows).double().numpy()
