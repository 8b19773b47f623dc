"""A small numpy network for the Retina baselines: one hidden layer, a sigmoid output for the
probability of referable disease, inverted dropout, weight decay, full-batch Adam on the
binary cross-entropy. Inputs are standardised with the training rows' mean and spread.
On an image task the network sees each image's mean colour over a 4 x 4 grid of blocks
(``features``): a weak baseline that shows the format, not a method for images (the CNN
baselines are those).

The baselines differ only in how they turn networks into a probability and an uncertainty:
``map.py`` (one network), ``mc_dropout.py`` (dropout kept on at test time, several passes),
``deep_ensemble.py`` (several networks from different seeds). The uncertainty of all three is
the predictive entropy of the averaged probability, as in RETINA.
"""
import numpy as np

HIDDEN = 32
EPOCHS = 200
LEARNING_RATE = 0.01
WEIGHT_DECAY = 0.03      # EPOCHS and WEIGHT_DECAY: chosen on the validation tasks only
BLOCKS = 4               # an image's features: its mean over BLOCKS x BLOCKS blocks per channel


def features(x, chunk_values=2**22):
    """Rows of features as they are (float64); images (n, H, W, C) as each image's mean over
    BLOCKS x BLOCKS blocks per channel, read from a memory map about ``chunk_values`` pixel
    values at a time (32 MiB as floats), whatever the images' size."""
    if np.ndim(x) != 4:
        return np.asarray(x, dtype=float)
    count, height, width, channels = x.shape
    chunk = max(1, chunk_values // (height * width * channels))
    rows, columns = height // BLOCKS, width // BLOCKS
    out = np.empty((count, BLOCKS * BLOCKS * channels))
    for start in range(0, count, chunk):
        part = np.asarray(x[start:start + chunk, :rows * BLOCKS, :columns * BLOCKS], float)
        part = part.reshape(len(part), BLOCKS, rows, BLOCKS, columns, channels)
        out[start:start + len(part)] = part.mean(axis=(2, 4)).reshape(len(part), -1)
    return out


class Network:
    def __init__(self, x_train, y_train, seed, dropout=0.0, hidden=HIDDEN):
        x_train = features(x_train)
        self.mean = x_train.mean(axis=0)
        self.scale = x_train.std(axis=0) + 1e-8
        self.dropout = dropout
        rng = np.random.default_rng(seed)
        inputs = x_train.shape[1]
        self.weights = [rng.normal(0, 1 / np.sqrt(inputs), (inputs, hidden)), np.zeros(hidden),
                        rng.normal(0, 1 / np.sqrt(hidden), (hidden, 1)), np.zeros(1)]
        self._rng = rng
        self._fit(self._standard(x_train), np.asarray(y_train, float).reshape(-1, 1))

    def _standard(self, x):
        return (features(x) - self.mean) / self.scale

    def _mask(self, shape):
        if not self.dropout:
            return 1.0
        return (self._rng.random(shape) >= self.dropout) / (1 - self.dropout)

    def _forward(self, x, mask):
        w1, b1, w2, b2 = self.weights
        hidden = np.tanh(x @ w1 + b1) * mask
        return hidden, 1 / (1 + np.exp(-(hidden @ w2 + b2)))

    def _fit(self, x, y):
        moments = [np.zeros_like(w) for w in self.weights]
        squares = [np.zeros_like(w) for w in self.weights]
        for step in range(1, EPOCHS + 1):
            mask = self._mask((len(x), self.weights[1].size))
            hidden, p = self._forward(x, mask)
            error = (p - y) / len(x)                       # d loss / d logit
            back = (error @ self.weights[2].T) * mask * (1 - (hidden / np.where(
                mask == 0, 1, mask)) ** 2)
            grads = [x.T @ back, back.sum(0), hidden.T @ error, error.sum(0)]
            for i, grad in enumerate(grads):
                grad = grad + WEIGHT_DECAY * self.weights[i]
                moments[i] = 0.9 * moments[i] + 0.1 * grad
                squares[i] = 0.999 * squares[i] + 0.001 * grad ** 2
                corrected = moments[i] / (1 - 0.9 ** step)
                self.weights[i] -= LEARNING_RATE * corrected / (
                    np.sqrt(squares[i] / (1 - 0.999 ** step)) + 1e-8)

    def probability(self, x, sample_dropout=False):
        x = self._standard(x)
        mask = self._mask((len(x), self.weights[1].size)) if sample_dropout else 1.0
        return self._forward(x, mask)[1].ravel()


def entropy(p):
    """Predictive entropy of a Bernoulli probability, natural log (RETINA's uncertainty)."""
    q = np.clip(p, 1e-12, 1 - 1e-12)
    return -(q * np.log(q) + (1 - q) * np.log(1 - q))
