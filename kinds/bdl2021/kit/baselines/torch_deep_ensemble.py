"""Baseline (PyTorch): deep ensemble (Lakshminarayanan et al. 2017) of MAP solutions of the
declared network.

Each member starts from its own draw of the declared initialisation and is trained with
minibatch Adam on the declared model's potential (the likelihood scaled by N / batch size,
plus the Gaussian prior: ``torch_training.DeclaredModel.potential``) for at most EPOCHS
epochs; the ensemble's predictive is the average of the members' (regression: draws of y
round robin over the members, with the declared Gaussian noise). The members share half of
what is left of the budget equally, less the final predictive's cost (measured per member by
the checkpoints). The first member checkpoints after its first epoch (or the first epoch
after that where one fits), so a usable prediction exists early; the ensemble checkpoints
after every member, each one an improvement. On the GPU when there is one; repeatable on
the CPU given its seed when no deadline cuts it short.
"""
import time

import numpy as np

from torch_training import Budget, DeclaredModel, adam, predictive, sample_passes

MEMBERS = 5
EPOCHS = 200               # a ceiling: the members share the budget first
BATCH = 128
LEARNING_RATE = 1e-3
TIME_SHARE = 0.5            # of the budget: the margin absorbs a slower machine
SEED = 0


def predict(task, x_train, y_train, x_test, checkpoint):
    model = DeclaredModel(task, x_train, y_train)
    rng = np.random.default_rng(SEED)
    budget = Budget(task, TIME_SHARE)
    steps_per_epoch = -(-model.n // min(BATCH, model.n))
    members, early = [], []

    def save(thetas):
        return budget.checkpoint(checkpoint, lambda: predictive(
            task, model, sample_passes(model, thetas), x_test, rng), len(thetas))

    def first_epochs(theta, step):       # the first member's: until one checkpoint is made
        if not early and step % steps_per_epoch == 0 and save([theta]):
            early.append(True)

    for member in range(MEMBERS):
        share = (budget.left() - budget.reserve(MEMBERS)) / (MEMBERS - member)
        if members and share <= 0:
            break
        member_deadline = time.monotonic() + share
        theta = adam(model, model.initial(rng), rng, EPOCHS * steps_per_epoch, LEARNING_RATE,
                     BATCH, lambda: time.monotonic() > member_deadline,
                     callback=first_epochs if member == 0 else None)
        members.append(theta)
        if member < MEMBERS - 1:
            save(members)
    return predictive(task, model, sample_passes(model, members), x_test, rng)
