"""The PGDL 2020 participant contract, on the child's side: what ``complexity`` receives.

Staged into each task's sandbox with ``layers.py`` beside it (standard library and numpy only,
no imports from the programs). The participant's module (``complexity.py``) defines::

    def complexity(model, dataset):
        ...                      # model: one trained network (Model); dataset: its training
                                 # data (Dataset)
        return value             # a float; a higher value predicts a larger generalisation gap

``complexity`` is called once per trained network of a task, in the task's order; only the
ranking of the returned numbers matters. PGDL's networks were Keras models; here a network is
the same stack of Keras layers (Conv2D, pooling, BatchNormalization, Dense, ...) evaluated with
numpy in float32 (``layers.py``), with Keras's weight order and names (see ``Model``).
"""
import json
import math
import os
import struct
import time
import traceback
import zipfile

import numpy

from . import frameworks
from . import layers as nn

SIGNATURE = "(model, dataset)"
HELPER_FILES = ("layers.py", "frameworks.py")
DEFAULT_BATCH_SIZE = 128      # the task-1 VGG's gradient pass: about 0.4 GB of windows
# Batch normalisation's running statistics: weights Keras does not train.
NOT_TRAINED = ("moving_mean", "moving_variance")


def _read_only(array):
    array = numpy.array(array, dtype=nn.DTYPE)          # a float32 copy
    array.setflags(write=False)
    return array


def _check_weights(model_id, keys, stack, arrays, what):
    if len(arrays) != len(keys):
        raise ValueError(f"{model_id}: {what} holds {len(arrays)} arrays; the network has "
                         f"{len(keys)} ({', '.join(key for _, _, key in keys)})")
    for (index, param, key), array in zip(keys, arrays):
        expected = stack[index].params[param]
        if array.shape != expected:
            raise ValueError(f"{model_id}: {what} {key}: shape {array.shape}, expected "
                             f"{expected}")


def _read_weights(path, model_id, keys, stack):
    with numpy.load(path, allow_pickle=False) as stored:
        missing = [key for _, _, key in keys if key not in stored.files]
        if missing:
            raise ValueError(f"{model_id}: {os.path.basename(path)} has no {missing[0]} "
                             f"(it holds {', '.join(sorted(stored.files))})")
        arrays = [_read_only(stored[key]) for _, _, key in keys]
    _check_weights(model_id, keys, stack, arrays, os.path.basename(path))
    return arrays


def _log_softmax(logits):
    logits = numpy.asarray(logits, numpy.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))


def _labels(y):
    return numpy.asarray(y).astype(numpy.int64).reshape(-1)


class Model:
    """One trained network of the task: a stack of Keras layers evaluated with numpy in float32.

    Inputs x are (n, *input_shape), e.g. (n, 32, 32, 3) as Keras holds images, or flattened
    (n, d); labels y are (n,) integer class indices. Every method runs its inputs through the
    network ``batch_size`` examples at a time, so its memory is bounded by that batch size
    whatever n is (set ``model.batch_size`` lower for large networks).

    - ``id``: the model's folder name, e.g. ``"model_12"``.
    - ``config``: the parsed ``config.json`` (``{"model_config": [...], "input_shape": [...]}``).
    - ``input_shape``: tuple, the shape of one example; ``num_classes``: C, the width of the
      last layer's output (the logits).
    - ``layers``: one dict per layer, in order: ``{"name": "conv2d_0", "class_name": "Conv2D",
      "config": {...}, "input_shape": (...), "output_shape": (...), "weights": [names]}``;
      the config holds the layer's normalised settings (``window``, ``strides``, ``padding``,
      ``filters``, ``units``, ``activation``, ``use_bias``, ``rate``, ``epsilon``).
    - ``weights``: the arrays of Keras's ``model.get_weights()``, in its order, float32 and
      read-only: Conv2D kernel (kh, kw, in, out) and bias; Dense kernel (in, out) and bias;
      BatchNormalization gamma, beta, moving_mean, moving_variance. ``weight_names`` names
      each (``"conv2d_0/kernel"``); ``trainable`` says which training changed by gradient
      (False for the moving statistics).
    - ``initial_weights``: the same list at initialisation (``weights_init.npz``), or None
      when the task gives none.
    - ``num_parameters``: the number of scalars in ``weights`` (Keras's ``count_params()``).
    - ``logits(x)`` / ``predict(x)``: (n, C) float32 (``predict`` is Keras's name; the
      network's output is the logits); ``probabilities(x)``: their softmax.
    - ``activations(x)``: one array per layer, its output (n, *output_shape); the last is
      ``logits(x)``. Convolutions with an activation give the activated output.
    - ``loss(x, y)``: mean softmax cross-entropy (float); ``accuracy(x, y)``: the fraction of
      argmax(logits) == y.
    - ``gradients(x, y)``: d loss(x, y) / d each array of ``weights``, the same shapes, in the
      same order; ``input_gradients(x, y)``: d loss / d x, the shape of x;
      ``loss_and_gradients(x, y)``: ``(loss, gradients)`` from one pass.
    - ``to_torch(device=None)`` / ``to_keras()``: the same network in PyTorch or Keras with
      these weights, for the GPU (where the framework is installed, as in the gpu310 image).
    - ``with_weights(weights)``: a new Model with the same layers and these arrays (shaped and
      ordered like ``weights``), e.g. for sharpness or PAC-Bayes perturbations; this model is
      unchanged.
    """

    def __init__(self, folder, batch_size=DEFAULT_BATCH_SIZE):
        self.folder = os.path.abspath(folder)
        self.id = os.path.basename(self.folder.rstrip(os.sep))
        with open(os.path.join(self.folder, "config.json"), encoding="utf-8") as handle:
            self.config = json.load(handle)
        self.input_shape = tuple(int(size) for size in self.config["input_shape"])
        try:
            self._stack = nn.network(self.config["model_config"], self.input_shape)
        except nn.LayerError as error:
            raise ValueError(f"{self.id}: config.json: {error}") from None
        if len(self._stack[-1].output_shape) != 1:
            raise ValueError(f"{self.id}: config.json: the network's output has shape "
                             f"{self._stack[-1].output_shape}; logits are one value per class")
        self._keys = nn.weight_keys(self._stack)
        self._weights = _read_weights(os.path.join(self.folder, "weights.npz"), self.id,
                                      self._keys, self._stack)
        init_path = os.path.join(self.folder, "weights_init.npz")
        self._initial = (_read_weights(init_path, self.id, self._keys, self._stack)
                         if os.path.exists(init_path) else None)
        self._params = self._per_layer(self._weights)
        self.batch_size = batch_size

    def _per_layer(self, weights):
        params = [{} for _ in self._stack]
        for (index, param, _), array in zip(self._keys, weights):
            params[index][param] = array
        return params

    # --- read-only description -------------------------------------------------------------

    @property
    def num_classes(self):
        return self._stack[-1].output_shape[0]

    @property
    def layers(self):
        names = nn.layer_names(self._stack)
        return [{"name": name, "class_name": layer.kind, "config": dict(layer.settings),
                 "input_shape": layer.input_shape, "output_shape": layer.output_shape,
                 "weights": [f"{name}/{param}" for param in layer.params]}
                for name, layer in zip(names, self._stack)]

    @property
    def weights(self):
        return list(self._weights)

    @property
    def weight_names(self):
        return [key for _, _, key in self._keys]

    @property
    def trainable(self):
        return [param not in NOT_TRAINED for _, param, _ in self._keys]

    @property
    def initial_weights(self):
        return None if self._initial is None else list(self._initial)

    @property
    def num_parameters(self):
        return int(sum(array.size for array in self._weights))

    def with_weights(self, weights):
        """A new Model with the same layers and these arrays, in ``weights``'s order."""
        arrays = [_read_only(array) for array in weights]
        _check_weights(self.id, self._keys, self._stack, arrays, "with_weights")
        other = Model.__new__(Model)
        other.__dict__.update(self.__dict__)
        other._weights, other._params = arrays, self._per_layer(arrays)
        return other

    # --- forward and backward, batch_size examples at a time ----------------------------------

    def _inputs(self, x):
        x = numpy.asarray(x, dtype=nn.DTYPE)
        if x.shape == self.input_shape:
            return x[None]
        if x.shape[1:] == self.input_shape:
            return x
        if x.ndim == 2 and x.shape[1] == math.prod(self.input_shape):
            return x.reshape(len(x), *self.input_shape)
        raise ValueError(f"inputs of shape {x.shape}; the network takes (n, "
                         f"{', '.join(map(str, self.input_shape))})")

    def _chunks(self, n):
        size = int(self.batch_size)
        if size < 1:
            raise ValueError("batch_size must be at least 1")
        return [slice(start, min(start + size, n)) for start in range(0, n, size)] or [
            slice(0, 0)]

    def activations(self, x):
        """Each layer's output, (n, *output_shape) per layer."""
        x = self._inputs(x)
        per_chunk = []
        for part in self._chunks(len(x)):
            outputs, a = [], x[part]
            for layer, params in zip(self._stack, self._params):
                a = nn.forward(layer, params, a)[0]
                outputs.append(a)
            per_chunk.append(outputs)
        return [numpy.concatenate(column) for column in zip(*per_chunk)]

    def _forward(self, x):
        """The output of one chunk, each layer's cache dropped as soon as the next layer has
        run: a forward pass holds one layer's windows at a time, not every layer's."""
        for layer, params in zip(self._stack, self._params):
            x = nn.forward(layer, params, x)[0]
        return x

    def logits(self, x):
        """Logits (n, C), float32."""
        x = self._inputs(x)
        return numpy.concatenate([self._forward(x[part]) for part in self._chunks(len(x))])

    predict = logits

    def probabilities(self, x):
        """Softmax of the logits, (n, C)."""
        return numpy.exp(_log_softmax(self.logits(x))).astype(nn.DTYPE)

    def loss(self, x, y):
        """Mean softmax cross-entropy over the examples."""
        y = _labels(y)
        log_p = _log_softmax(self.logits(x))
        return float(-log_p[numpy.arange(len(y)), y].mean())

    def accuracy(self, x, y):
        """Fraction of examples whose largest logit is the label."""
        return float((self.logits(x).argmax(axis=1) == _labels(y)).mean())

    def _backward(self, x, y):
        """(loss, weight gradients in ``weights``'s order, input gradients) of the batch mean."""
        x, y = self._inputs(x), _labels(y)
        n = len(x)
        if n == 0 or len(y) != n:
            raise ValueError(f"{n} inputs and {len(y)} labels; expected as many, at least one")
        loss, grads, dx = 0.0, None, numpy.empty_like(x)
        for part in self._chunks(n):
            out, caches = nn.run(self._stack, self._params, x[part])
            chunk_loss, dlogits = nn.cross_entropy_gradient(out, y[part])
            share = (part.stop - part.start) / n    # the chunk's mean, weighted to the whole's
            dx[part], per_layer = nn.run_backward(self._stack, self._params, caches,
                                                  dlogits * nn.DTYPE(share))
            loss += chunk_loss * share
            flat = [per_layer[index][param] for index, param, _ in self._keys]
            grads = flat if grads is None else [a + b for a, b in zip(grads, flat)]
        return loss, grads, dx

    def loss_and_gradients(self, x, y):
        """(loss(x, y), gradients(x, y)) from one forward and backward pass."""
        loss, grads, _ = self._backward(x, y)
        return loss, grads

    def gradients(self, x, y):
        """d loss(x, y) / d each array of ``weights``, in its order and shapes."""
        return self._backward(x, y)[1]

    def input_gradients(self, x, y):
        """d loss(x, y) (the mean over the examples) / d x, the shape of x."""
        return self._backward(x, y)[2].reshape(numpy.shape(x))

    # --- the same network in a framework, for the GPU ------------------------------------------

    def to_torch(self, device=None):
        """This network as a ``torch.nn.Module`` (on ``device``), same weights, same logits
        from the same (n, *input_shape) inputs; its ``keras_weights`` are ``weights``'s
        arrays in their order and layouts (so their ``.grad`` lines up with ``gradients``).
        ImportError where PyTorch is not installed."""
        return frameworks.to_torch(self._stack, self._keys, self._weights, self.trainable,
                                   device)

    def to_keras(self):
        """This network as a Keras ``Sequential`` built from ``config.json`` as PGDL's loader
        built it, with these weights. ImportError where TensorFlow is not installed."""
        return frameworks.to_keras(self.config, self._weights)

    def __repr__(self):
        kinds = ", ".join(layer.kind for layer in self._stack)
        return f"Model({self.id!r}, input {self.input_shape}, [{kinds}])"


def _mapped_member(path, key):
    """The array ``key`` of an .npz stored uncompressed (as this kind writes them), mapped
    read-only from the file, so that a training set of 50,000 images costs the pages a
    measure reads, not 600 MB up front; None for a compressed member."""
    with zipfile.ZipFile(path) as archive:
        try:
            info = archive.getinfo(f"{key}.npy")
        except KeyError:
            return None
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        header = handle.read(30)                     # the member's local file header
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            return None
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        handle.seek(info.header_offset + 30 + name_length + extra_length)
        version = numpy.lib.format.read_magic(handle)
        read_header = (numpy.lib.format.read_array_header_1_0 if version == (1, 0)
                       else numpy.lib.format.read_array_header_2_0)
        shape, fortran_order, dtype = read_header(handle)
        offset = handle.tell()
    if dtype.hasobject or not shape or 0 in shape:
        return None
    return numpy.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                        order="F" if fortran_order else "C")


class Dataset:
    """The task's training data (the networks were trained on it; no test data is given).

    - ``size``: N, the number of examples.
    - ``input_shape``: tuple, the shape of one example, e.g. (32, 32, 3) or (d,).
    - ``num_classes``: C, the number of classes (the networks' output width).
    - ``inputs``, ``labels``: read-only arrays, inputs (N, *input_shape) float32 (mapped from
      the file: indexing a batch reads that batch), labels (N,) int64.
    - ``batches(batch_size, shuffle=False, seed=0)``: yields ``(x, y)`` batches, x
      (b, *input_shape) float32, y (b,) int64, b = batch_size (the last one may be smaller); with ``shuffle``, in
      a random order fixed by ``seed``.
    - ``take(n)``: ``(x, y)``, the first n examples (all of them if n >= N).
    """

    def __init__(self, folder, num_classes=None):
        path = os.path.join(folder, "train.npz")
        inputs = _mapped_member(path, "inputs")
        with numpy.load(path, allow_pickle=False) as stored:
            if inputs is None or inputs.dtype != nn.DTYPE:
                inputs = numpy.asarray(stored["inputs"]).astype(nn.DTYPE, copy=False)
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
