"""The PGDL 2020 participant contract, on the child's side: what ``complexity`` receives.

Copied alone into each task's sandbox (standard library and numpy only, no imports from the
programs). The participant's module (``complexity.py``) defines::

    def complexity(model, dataset):
        ...                      # model: one trained network (Model); dataset: its training
                                 # data (Dataset)
        return value             # a float; a higher value predicts a larger generalisation gap

``complexity`` is called once per trained network of a task, in the task's order; only the
ranking of the returned numbers matters. PGDL's networks were Keras models; here a network is a
plain multilayer perceptron evaluated with numpy in float64 (see ``Model``).
"""
import json
import math
import os
import time
import traceback

import numpy

SIGNATURE = "(model, dataset)"

ACTIVATIONS = ("relu", "tanh", "linear")


def _read_only(array):
    array = numpy.array(array, dtype=numpy.float64)     # a float64 copy
    array.setflags(write=False)
    return array


def _read_weights(path, dense_count):
    with numpy.load(path, allow_pickle=False) as stored:
        return [(_read_only(stored[f"dense_{k}/kernel"]), _read_only(stored[f"dense_{k}/bias"]))
                for k in range(dense_count)]


def _parse_layers(model_config):
    layers = []
    for index, entry in enumerate(model_config):
        name = entry.get("layer_name")
        if name == "Dense":
            activation = entry.get("activation", "linear") or "linear"
            if activation not in ACTIVATIONS:
                raise ValueError(f"layer {index}: activation {activation!r} is not one of "
                                 f"{', '.join(ACTIVATIONS)}")
            layers.append({"name": "Dense", "units": int(entry["units"]),
                           "activation": activation, "rate": None})
        elif name == "Dropout":
            layers.append({"name": "Dropout", "units": None, "activation": None,
                           "rate": float(entry.get("rate", 0.0))})
        else:
            raise ValueError(f"layer {index}: layer_name {name!r} is not Dense or Dropout")
    if not any(layer["name"] == "Dense" for layer in layers):
        raise ValueError("the model has no Dense layer")
    return layers


def _activate(name, z):
    if name == "relu":
        return numpy.maximum(z, 0.0)
    if name == "tanh":
        return numpy.tanh(z)
    return z


def _activation_derivative(name, z, a):
    if name == "relu":
        return (z > 0.0).astype(numpy.float64)
    if name == "tanh":
        return 1.0 - a * a
    return None     # linear: the derivative is 1


def _log_softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))


class Model:
    """One trained network of the task: a multilayer perceptron, evaluated with numpy in float64.

    Attributes and methods (n examples, d = product of ``input_shape``, C = ``num_classes``):

    - ``id``: the model's folder name, e.g. ``"model_12"``.
    - ``config``: the parsed ``config.json`` (``{"model_config": [...], "input_shape": [...]}``).
    - ``input_shape``: tuple, the shape of one example (inputs are flattened to d values).
    - ``num_classes``: C, the units of the last Dense layer (its outputs are logits).
    - ``layers``: list of dicts, one per layer in order, each ``{"name": "Dense" or "Dropout",
      "units": int or None, "activation": "relu" | "tanh" | "linear" or None,
      "rate": float or None}`` (Dropout: ``rate``; identity at inference).
    - ``weights``: list of ``(kernel, bias)`` pairs, one per Dense layer in order: kernel
      (in, out), bias (out,), float64 read-only arrays (copy them to change them and use
      ``with_weights``).
    - ``initial_weights``: the same structure for the weights at initialisation
      (``weights_init.npz``), or None when the task gives none.
    - ``num_parameters``: int, the number of scalars in ``weights``.
    - ``logits(x)`` / ``predict(x)``: x (n, d) or (n, *input_shape) -> logits (n, C) float64
      (``predict`` is the Keras name; the model's output is the logits).
    - ``probabilities(x)``: (n, C), softmax of the logits.
    - ``activations(x)``: list, one ``(pre, post)`` pair per layer of ``layers``: for a Dense
      layer pre = inputs @ kernel + bias and post = activation(pre), both (n, units); for a
      Dropout layer pre = post = its input. The last pair's post is ``logits(x)``.
    - ``loss(x, y)``: float, mean softmax cross-entropy; y (n,) integer class indices.
    - ``accuracy(x, y)``: float, the fraction of argmax(logits) == y.
    - ``gradients(x, y)``: gradients of ``loss(x, y)`` with respect to every kernel and bias:
      list of ``(d_kernel, d_bias)`` pairs, the same shapes as ``weights``.
    - ``input_gradients(x, y)``: the gradient of ``loss(x, y)`` (the mean over the batch) with
      respect to x, the shape of x.
    - ``with_weights(weights)``: a new Model with the same layers and these weights (a list of
      ``(kernel, bias)`` pairs shaped like ``weights``), e.g. for sharpness or PAC-Bayes
      perturbations; this model is unchanged.
    """

    def __init__(self, folder):
        self.folder = os.path.abspath(folder)
        self.id = os.path.basename(self.folder.rstrip(os.sep))
        with open(os.path.join(self.folder, "config.json"), encoding="utf-8") as handle:
            self.config = json.load(handle)
        self._setup(_parse_layers(self.config["model_config"]),
                    tuple(int(size) for size in self.config.get("input_shape", ())))
        dense = sum(1 for layer in self._layers if layer["name"] == "Dense")
        self._weights = _read_weights(os.path.join(self.folder, "weights.npz"), dense)
        init_path = os.path.join(self.folder, "weights_init.npz")
        self._initial = (_read_weights(init_path, dense) if os.path.exists(init_path) else None)
        self._check(self._weights, "weights.npz")
        if self._initial is not None:
            self._check(self._initial, "weights_init.npz")

    def _setup(self, layers, input_shape):
        self._layers = layers
        self.input_shape = input_shape
        self.input_size = int(numpy.prod(input_shape)) if input_shape else None
        self.num_classes = [layer for layer in layers if layer["name"] == "Dense"][-1]["units"]

    def _check(self, weights, what):
        fan_in = self.input_size
        units = [layer["units"] for layer in self._layers if layer["name"] == "Dense"]
        if len(weights) != len(units):
            raise ValueError(f"{self.id}: {what} holds {len(weights)} Dense layers, the config "
                             f"{len(units)}")
        for k, ((kernel, bias), out) in enumerate(zip(weights, units)):
            expected = (fan_in if fan_in is not None else kernel.shape[0], out)
            if kernel.shape != expected or bias.shape != (out,):
                raise ValueError(f"{self.id}: {what} dense_{k}: kernel {kernel.shape}, bias "
                                 f"{bias.shape}; expected {expected} and ({out},)")
            fan_in = out

    # --- read-only description -------------------------------------------------------------

    @property
    def layers(self):
        return [dict(layer) for layer in self._layers]

    @property
    def weights(self):
        return list(self._weights)

    @property
    def initial_weights(self):
        return None if self._initial is None else list(self._initial)

    @property
    def num_parameters(self):
        return int(sum(kernel.size + bias.size for kernel, bias in self._weights))

    def with_weights(self, weights):
        """A new Model with the same layers and these ``(kernel, bias)`` pairs."""
        other = Model.__new__(Model)
        other.folder, other.id, other.config = self.folder, self.id, self.config
        other._setup(self._layers, self.input_shape)
        other._weights = [(_read_only(kernel), _read_only(bias)) for kernel, bias in weights]
        other._initial = self._initial
        other._check(other._weights, "with_weights")
        return other

    # --- forward and backward --------------------------------------------------------------

    def _inputs(self, x):
        x = numpy.asarray(x, dtype=numpy.float64)
        if x.ndim == 1 and self.input_size is not None and x.size == self.input_size:
            x = x[None, :]
        return x.reshape(x.shape[0], -1)

    def activations(self, x):
        """One ``(pre, post)`` pair of (n, units) arrays per layer (Dropout: its input twice)."""
        a = self._inputs(x)
        out = []
        dense = iter(self._weights)
        for layer in self._layers:
            if layer["name"] == "Dense":
                kernel, bias = next(dense)
                z = a @ kernel + bias
                a = _activate(layer["activation"], z)
                out.append((z, a))
            else:
                out.append((a, a))
        return out

    def logits(self, x):
        """Logits (n, C) for inputs (n, d)."""
        return self.activations(x)[-1][1]

    predict = logits

    def probabilities(self, x):
        """Softmax of the logits, (n, C)."""
        return numpy.exp(_log_softmax(self.logits(x)))

    def loss(self, x, y):
        """Mean softmax cross-entropy over the batch."""
        y = numpy.asarray(y).astype(numpy.int64).reshape(-1)
        logp = _log_softmax(self.logits(x))
        return float(-logp[numpy.arange(len(y)), y].mean())

    def accuracy(self, x, y):
        """Fraction of examples whose largest logit is the label."""
        y = numpy.asarray(y).astype(numpy.int64).reshape(-1)
        return float((self.logits(x).argmax(axis=1) == y).mean())

    def _backward(self, x, y):
        inputs = self._inputs(x)
        y = numpy.asarray(y).astype(numpy.int64).reshape(-1)
        trace = self.activations(inputs)
        n = inputs.shape[0]
        delta = numpy.exp(_log_softmax(trace[-1][1]))
        delta[numpy.arange(n), y] -= 1.0
        delta /= n                                  # d loss / d logits
        grads = []
        dense_index = len(self._weights)
        for index in range(len(self._layers) - 1, -1, -1):
            layer = self._layers[index]
            if layer["name"] != "Dense":
                continue                            # identity: the gradient passes through
            dense_index -= 1
            kernel, _ = self._weights[dense_index]
            z, a = trace[index]
            derivative = _activation_derivative(layer["activation"], z, a)
            if derivative is not None:
                delta = delta * derivative          # d loss / d pre-activation
            below = inputs if index == 0 else trace[index - 1][1]
            grads.append((below.T @ delta, delta.sum(axis=0)))
            delta = delta @ kernel.T                # d loss / d this layer's input
        grads.reverse()
        return grads, delta

    def gradients(self, x, y):
        """Gradients of ``loss(x, y)``: ``(d_kernel, d_bias)`` pairs shaped like ``weights``."""
        return self._backward(x, y)[0]

    def input_gradients(self, x, y):
        """Gradient of ``loss(x, y)`` (the batch mean) with respect to x, the shape of x."""
        return self._backward(x, y)[1].reshape(numpy.shape(x))

    def __repr__(self):
        widths = [layer["units"] for layer in self._layers if layer["name"] == "Dense"]
        return f"Model({self.id!r}, input {self.input_shape}, dense {widths})"


class Dataset:
    """The task's training data (the networks were trained on it; no test data is given).

    - ``size``: N, the number of examples.
    - ``input_shape``: tuple, the shape of one example (d,).
    - ``num_classes``: C, the number of classes (the networks' output width).
    - ``inputs``, ``labels``: read-only arrays, inputs (N, d) float64, labels (N,) int64.
    - ``batches(batch_size, shuffle=False, seed=0)``: yields ``(x, y)`` batches, x (b, d)
      float64, y (b,) int64, b = batch_size (the last one may be smaller); with ``shuffle``, in
      a random order fixed by ``seed``.
    - ``take(n)``: ``(x, y)``, the first n examples (all of them if n >= N).
    """

    def __init__(self, folder, num_classes=None):
        with numpy.load(os.path.join(folder, "train.npz"), allow_pickle=False) as stored:
            inputs = numpy.array(stored["inputs"], dtype=numpy.float64)
            labels = numpy.array(stored["outputs"]).astype(numpy.int64).reshape(-1)
        if inputs.shape[0] != labels.shape[0]:
            raise ValueError(f"train.npz: {inputs.shape[0]} inputs, {labels.shape[0]} labels")
        inputs.setflags(write=False)
        labels.setflags(write=False)
        self.inputs, self.labels = inputs, labels
        self.size = int(inputs.shape[0])
        self.input_shape = tuple(int(size) for size in inputs.shape[1:])
        if num_classes is None:
            num_classes = int(labels.max()) + 1 if self.size else 0
        self.num_classes = int(num_classes)

    def __len__(self):
        return self.size

    def batches(self, batch_size, shuffle=False, seed=0):
        """Yields ``(x, y)`` batches of ``batch_size`` examples (the last may be smaller)."""
        batch_size = int(batch_size)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        order = (numpy.random.default_rng(seed).permutation(self.size) if shuffle else None)
        for start in range(0, self.size, batch_size):
            if order is None:
                yield self.inputs[start:start + batch_size], self.labels[start:start + batch_size]
            else:
                chosen = order[start:start + batch_size]
                yield self.inputs[chosen], self.labels[chosen]

    def take(self, n):
        """``(x, y)``: the first n examples."""
        n = max(0, int(n))
        return self.inputs[:n], self.labels[:n]

    def __repr__(self):
        return (f"Dataset({self.size} examples, input {self.input_shape}, "
                f"{self.num_classes} classes)")


def _model_folder(data, model_id):
    folder = os.path.join(data, str(model_id))
    if not os.path.isdir(folder) and not str(model_id).startswith("model_"):
        folder = os.path.join(data, f"model_{model_id}")
    return folder


# numpy dtype kinds of a real number: booleans, complex numbers and strings are not measures
REAL_KINDS = "iuf"


def _number(value):
    """``float(value)`` for one real number; TypeError for anything else. ``float`` may run
    the object's own ``__float__``: the caller catches whatever that raises."""
    if isinstance(value, numpy.ndarray):
        if value.size != 1:
            raise TypeError("not one number")
        value = numpy.asarray(value).reshape(())[()]
    kind = value.dtype.kind if isinstance(value, numpy.generic) else None
    if (isinstance(value, (bool, str, bytes, bytearray)) or value is None
            or (kind is not None and kind not in REAL_KINDS)):
        raise TypeError("not a number")
    return float(value)


def _shown(value):
    """What was returned, described without running its own code: its ``__repr__`` may raise,
    hang or run to megabytes, and ``str`` of an int of 5000 digits raises."""
    try:
        kind = type(value)
        if kind in (bool, numpy.bool_):
            return f"the boolean {bool(value)}"
        if kind is int:
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        if kind in (str, bytes, bytearray):
            return f"{kind.__name__} {value[:60]!r}"
        if kind is numpy.ndarray:
            return f"an array of shape {value.shape} and dtype {value.dtype}"
        if isinstance(value, numpy.generic):
            return f"a numpy {value.dtype} value"
        return "None" if value is None else f"an object of type {kind.__name__}"
    except BaseException:       # noqa: BLE001 - a hostile type's name: still this network only
        return "an object"


def _exception_text(error):
    """``Type: message``; a message that cannot be made (its ``__str__`` raised) is left out."""
    try:
        text = str(error)[:300]
    except BaseException:       # noqa: BLE001 - their __str__ fails: the type still says a lot
        text = ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _traceback_text(error):
    """Their frames only: the first is ``_measure``'s, where the call was made."""
    try:
        frames = error.__traceback__.tb_next if error.__traceback__ else None
        return "".join(traceback.format_exception(type(error), error, frames))
    except BaseException:       # noqa: BLE001 - a hostile exception's chain: its name will do
        return f"({type(error).__name__}: its traceback could not be printed)\n"


def _say(text):
    """Straight to descriptor 2: their code may have replaced or closed ``sys.stderr``."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _measure(function, model, dataset, limit):
    """``(value, None, None)``, or ``(None, why, error)`` when the network gets no value.

    Whatever their call raises costs this network only, SystemExit and KeyboardInterrupt too:
    uncaught, they would end this process with an error report, after which the ingestion
    starts no fresh process (it does after a crash or a kill), so the rest of the zoo would go
    unmeasured. ``os._exit`` is left alone: it ends the process like a crash, which costs that
    network only, and code that forks must keep it to end its children."""
    began = time.monotonic()
    try:
        value = function(model, dataset)
    except BaseException as error:  # noqa: BLE001 - see above
        return None, f"raised {_exception_text(error)}", error
    try:
        number = _number(value)
    except BaseException as error:  # noqa: BLE001 - their __float__ is their code too
        if isinstance(error, TypeError):
            return None, f"returned {_shown(value)}, not a number", None
        return None, (f"returned {_shown(value)}, which float() refused "
                      f"({_exception_text(error)})"), None
    elapsed = time.monotonic() - began
    if elapsed > limit:
        return None, f"took {elapsed:.2f} s, more than the {limit:g} s per model", None
    if not math.isfinite(number):
        return None, f"returned {number}, not a finite number", None
    return number, None, None


def call(function, spec, begin, checkpoint):
    """Calls ``function(model, dataset)`` for each model of the task, in order, from
    ``spec["first_unit"]`` on (the ingestion starts a fresh process there after killing one
    whose call ran past its limit or died).

    ``spec["data"]``: the staged task folder (``model_*/`` and ``dataset_1/train.npz``);
    ``spec["contract"]``: ``{"model_ids": [...], "seconds_per_model": s}``. Returns the float64
    vector of the values, NaN for a model whose call raised (SystemExit included), returned
    anything but a finite real number, took longer than ``seconds_per_model``, or that this
    process did not measure; each such model's reason goes to stderr. ``checkpoint(values)``
    follows every model: the parent counts them to know which model is under way. When this
    process ran the whole task and no model got a value, the first error is raised again, if
    any call raised one.
    """
    contract = spec["contract"]
    model_ids = list(contract["model_ids"])
    limit = float(contract["seconds_per_model"])
    first = int(spec.get("first_unit", 0))
    data = spec["data"]
    values = numpy.full(len(model_ids), numpy.nan, dtype=numpy.float64)
    first_model = Model(_model_folder(data, model_ids[first])) if first < len(model_ids) else None
    dataset = Dataset(os.path.join(data, "dataset_1"),
                      num_classes=first_model.num_classes if first_model else None)
    name = spec.get("entry_function", "complexity")
    first_error = None
    begin()          # loading the dataset and the first network was start-up
    for index, model_id in enumerate(model_ids[first:], start=first):
        model = first_model if index == first else Model(_model_folder(data, model_id))
        first_model = None
        number, why, error = _measure(function, model, dataset, limit)
        if why is None:
            values[index] = number
        else:
            _say(f"[{model_id}] {name}() {why}; its value is NaN\n")
            if error is not None:
                _say(_traceback_text(error))
                first_error = error if first_error is None else first_error
        checkpoint(values.copy())
    # Only a process that saw every model knows that none got a value; the ingestion judges
    # a zoo split between processes.
    if first == 0 and first_error is not None and not numpy.isfinite(values).any():
        raise first_error
    return values
