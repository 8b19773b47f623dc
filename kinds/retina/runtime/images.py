"""Batched numpy helpers for image tasks, on the participant's side (numpy only).

A task's images are memory-mapped uint8 arrays (n, H, W, C): a training loop reads one batch
at a time, so a 35,000-image set at 512 x 512 never sits in memory whole. These helpers work
on such batches; ``Task`` (participant.py) offers them as methods.
"""
import numpy

STATISTICS_SAMPLE = 2048     # training images the channel mean and spread are estimated on


def channel_statistics(images, sample=STATISTICS_SAMPLE):
    """Per channel, the mean and standard deviation of the pixel values / 255, estimated on up
    to ``sample`` evenly spaced images (float64, shape (C,) each; a spread of 0 becomes 1)."""
    count = len(images)
    rows = numpy.unique(numpy.linspace(0, count - 1, min(count, sample)).astype(numpy.int64))
    total = numpy.zeros(images.shape[-1])
    squares = numpy.zeros(images.shape[-1])
    pixels = 0
    for start in range(0, rows.size, 256):     # bounded memory on large images
        chunk = numpy.asarray(images[rows[start:start + 256]], dtype=numpy.float64) / 255.0
        total += chunk.sum(axis=(0, 1, 2))
        squares += numpy.square(chunk).sum(axis=(0, 1, 2))
        pixels += chunk.shape[0] * chunk.shape[1] * chunk.shape[2]
    mean = total / pixels
    spread = numpy.sqrt(numpy.maximum(squares / pixels - mean ** 2, 0.0))
    return mean, numpy.where(spread > 0, spread, 1.0)


def standardise(batch, mean, spread):
    """float32 (n, H, W, C): (batch / 255 - mean) / spread, per channel."""
    scaled = numpy.asarray(batch, dtype=numpy.float32) / numpy.float32(255.0)
    return (scaled - mean.astype(numpy.float32)) / spread.astype(numpy.float32)


def augment(batch, rng):
    """The batch with each image flipped left-right and up-down with probability 1/2 each and
    rotated about its centre by an angle drawn uniformly from [0, 360) (nearest neighbour;
    what comes from outside the image is 0, black as a fundus photograph's border). Same
    dtype and shape; fundus photographs have no upright, so any rotation is a fair copy."""
    batch = numpy.asarray(batch)
    out = numpy.empty_like(batch)
    height, width = batch.shape[1:3]
    for i, image in enumerate(batch):
        if rng.random() < 0.5:
            image = image[:, ::-1]
        if rng.random() < 0.5:
            image = image[::-1]
        out[i] = rotate(image, rng.uniform(0.0, 2 * numpy.pi), height, width)
    return out


def rotate(image, angle, height, width):
    """``image`` (H, W, C) rotated by ``angle`` radians about its centre, nearest neighbour:
    each output pixel takes the input pixel that the inverse rotation lands on."""
    rows, columns = numpy.mgrid[0:height, 0:width]
    centre_row, centre_column = (height - 1) / 2, (width - 1) / 2
    cos, sin = numpy.cos(angle), numpy.sin(angle)
    dr, dc = rows - centre_row, columns - centre_column
    source_row = numpy.rint(centre_row + cos * dr + sin * dc).astype(numpy.int64)
    source_column = numpy.rint(centre_column - sin * dr + cos * dc).astype(numpy.int64)
    inside = ((source_row >= 0) & (source_row < height)
              & (source_column >= 0) & (source_column < width))
    out = numpy.zeros_like(image)
    out[inside] = image[source_row[inside], source_column[inside]]
    return out


def batches(images, batch_size, rng=None):
    """(indices, uint8 batch) over ``images`` in order, or in one random order drawn from
    ``rng`` (call again for the next epoch's order). Each batch is read from the memory map
    when it is reached; a random order is read sorted within the batch (the disk reads
    forward), and ``indices`` says which rows the batch holds, in its order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, found {batch_size}")
    count = len(images)
    order = numpy.arange(count) if rng is None else rng.permutation(count)
    for start in range(0, count, batch_size):
        indices = numpy.sort(order[start:start + batch_size]) if rng is not None \
            else order[start:start + batch_size]
        yield indices, numpy.asarray(images[indices])
