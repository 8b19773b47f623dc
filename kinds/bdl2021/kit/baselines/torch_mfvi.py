"""Baseline (PyTorch): mean-field Gaussian variational inference (Bayes by Backprop,
Blundell et al. 2015) on the declared network, as ``mean_field_vi.py`` does it in numpy.

q(theta) = N(mu, diag(sigma^2)) over the declared parameter vector, sigma = exp(s), fitted by
maximising the ELBO E_q[log p(y | x, theta) + log p(theta)] + H(q) with the
reparameterisation trick: theta = mu + sigma * eps, eps ~ N(0, I), one draw per minibatch;
the loss is U_batch(theta) - sum s, U_batch the declared model's potential (likelihood
scaled by N / batch size, plus the declared prior N(0, prior_variance)), and autograd
carries its gradient to mu and s through theta. The mean starts at a minibatch Adam MAP run
(at most MAP_EPOCHS epochs and MAP_SHARE of the time), the log scales at
min(log 1e-2, log prior std) (a narrow q at a good mean, which the ELBO then widens); Adam on
(mu, s). The predictive samples q: classification averages the softmax probabilities over
DRAWS draws, regression draws y from them round robin (``torch_training.predictive``).
Training and the final predictive use at most half the budget (the checkpoints measure the
predictive's cost); a checkpoint of the MAP start's predictive, then after the first epoch
of VI and every CHECKPOINT_EVERY steps
keeps it anytime. On the GPU when there is one; repeatable on the CPU given its seed when no
deadline cuts it short.
"""
import math

import numpy as np
import torch

from torch_training import (Adam, Budget, DeclaredModel, finite, predictive, sample_passes,
                            seeded, warm_start)

MAP_EPOCHS = 5
MAP_SHARE = 0.25            # of the time, at most, for the MAP start
MAP_LEARNING_RATE = 1e-3
BATCH = 128
STEPS = 20000
LEARNING_RATE = 1e-3
INITIAL_LOG_SCALE = math.log(1e-2)
DRAWS = 30                  # draws of q in the predictive
CHECKPOINT_EVERY = 1000
TIME_SHARE = 0.5
SEED = 3


def predict(task, x_train, y_train, x_test, checkpoint):
    model = DeclaredModel(task, x_train, y_train)
    rng = np.random.default_rng(SEED)
    generator = seeded(SEED, model.device)
    budget = Budget(task, TIME_SHARE)
    batch = min(BATCH, model.n)
    steps_per_epoch = -(-model.n // batch)
    mean = warm_start(model, rng, budget, MAP_SHARE, MAP_EPOCHS, MAP_LEARNING_RATE, batch)
    log_scale = torch.full_like(mean, min(INITIAL_LOG_SCALE,
                                          0.5 * math.log(model.prior_variance)))
    optimiser = Adam([mean, log_scale], LEARNING_RATE)
    last_good = (mean.clone(), log_scale.clone())

    def sample_predictive(mu, s):
        draws = [mu + torch.exp(s) * torch.randn(mu.shape, generator=generator,
                                                 device=mu.device, dtype=mu.dtype)
                 for _ in range(DRAWS)]
        return predictive(task, model, sample_passes(model, draws), x_test, rng)

    budget.checkpoint(checkpoint, lambda: predictive(       # the MAP start: an early one
        task, model, sample_passes(model, [mean]), x_test, rng), 1)
    step, batches = 0, []
    while step < STEPS and not budget.over(DRAWS):
        if not batches:
            batches = model.batches(rng, batch)
        step += 1
        noise = torch.randn(mean.shape, generator=generator, device=mean.device,
                            dtype=mean.dtype)
        variables = (mean.detach().requires_grad_(), log_scale.detach().requires_grad_())
        loss = model.potential(variables[0] + torch.exp(variables[1]) * noise, batches.pop()) \
            - variables[1].sum()
        grads = torch.autograd.grad(loss, variables)
        if not all(map(finite, grads)):
            continue                        # a rare bad draw: skip it
        optimiser.step(grads)
        if finite(mean) and finite(log_scale):
            last_good = (mean.clone(), log_scale.clone())
        else:
            mean.copy_(last_good[0])
            log_scale.copy_(last_good[1])
        if step == steps_per_epoch or step % CHECKPOINT_EVERY == 0:
            budget.checkpoint(checkpoint, lambda: sample_predictive(*last_good), DRAWS)
    return sample_predictive(*last_good)
