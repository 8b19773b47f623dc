"""kinds/retina/reference/images.py: the border crop finds the retina's disc in a fundus
photograph whatever lies around it (faint noise, a grey frame, a corner label, a camera's
notch, a disc clipped at the top and bottom), and crops a clean disc as it always did."""
import io

import numpy as np
import pytest
from PIL import Image

from kinds.retina.reference import images

# (width, height, disc diameter): a landscape camera frame, a small one, a square one
SIZES = [(900, 600, 500), (560, 400, 340), (640, 640, 540)]
ARTEFACTS = ["noise", "grey frame", "label", "notch", "clipped"]
# Next to faint noise or a notch, a found edge may sit anywhere in the band the crop searches
# at full resolution (8 pixels or 2 reduced pixels a side: up to 2.4% of these discs), and
# JPEG blurs the edge by a pixel or two: 4% of the diameter keeps clear of both, and is below
# the 8-70% the old crop was off by.
TOLERANCE = 0.04


def photograph(width, height, diameter, artefact=None, seed=0):
    """A decoded JPEG of a fundus-like picture: a reddish disc, darker towards its rim (to 55%
    of its middle), centred on black, with ``artefact`` around it."""
    rng = np.random.default_rng(seed)
    if artefact == "clipped":
        diameter = round(height / 0.85)  # taller than the frame, as EyePACS's often are
    yy, xx = np.mgrid[:height, :width]
    distance = ((xx + 0.5 - width / 2) ** 2 + (yy + 0.5 - height / 2) ** 2) / (diameter / 2) ** 2
    disc = np.array([200.0, 100.0, 50.0]) * (1 - 0.45 * distance)[..., None]
    disc += rng.normal(0, 6, disc.shape)
    outside = np.zeros_like(disc)
    if artefact == "noise":
        outside += rng.integers(0, 26, outside.shape)
    elif artefact == "grey frame":
        outside += 32
    pixels = np.where((distance <= 1)[..., None], disc, outside)
    if artefact == "label":
        pixels[:height // 12, :width // 7] = 255                       # a white box
        for bar in range(6):                                            # and a line of text
            left = width - width // 5 + bar * width // 40
            pixels[height - height // 14:height - height // 40, left:left + 2] = 235
    if artefact == "notch":                  # a mark on the top of the field, 8% high
        half, top = round(0.0125 * diameter), round(height / 2 - 0.58 * diameter)
        assert top >= 0, "no room above the disc for the notch"
        pixels[top:height // 2, width // 2 - half:width // 2 + half] = (110, 55, 28)
        pixels[(distance <= 1)] = disc[(distance <= 1)]
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return Image.open(io.BytesIO(buffer.getvalue())), diameter


def old_box(picture, threshold=10):
    """The crop before: the box of every pixel with a channel above ``threshold``."""
    inside = np.asarray(picture).max(axis=2) > threshold
    rows, columns = np.flatnonzero(inside.any(axis=1)), np.flatnonzero(inside.any(axis=0))
    return columns[0], rows[0], columns[-1] + 1, rows[-1] + 1


@pytest.mark.parametrize("width, height, diameter, artefact", [
    (*size, artefact) for size in SIZES for artefact in ARTEFACTS
    if artefact != "clipped" or size[0] > size[1]])   # a square frame clips a disc all round
def test_the_disc_is_found_whatever_lies_around_it(width, height, diameter, artefact):
    picture, diameter = photograph(width, height, diameter, artefact)
    left, top, right, bottom = images.disc_box(picture, 10)
    tolerance = TOLERANCE * diameter
    assert abs((right - left) - diameter) <= tolerance, (left, right)
    assert abs((left + right) / 2 - width / 2) <= tolerance, (left, right)
    if artefact == "clipped":
        assert (top, bottom) == (0, height)
    else:
        assert abs((bottom - top) - diameter) <= tolerance, (top, bottom)
        assert abs((top + bottom) / 2 - height / 2) <= tolerance, (top, bottom)


@pytest.mark.parametrize("width, height, diameter", SIZES)
def test_a_clean_disc_is_cropped_as_before(width, height, diameter):
    picture, _ = photograph(width, height, diameter, seed=1)
    found, before = images.disc_box(picture, 10), old_box(picture)
    assert max(abs(a - b) for a, b in zip(found, before)) <= 1, (found, before)


def disc_width_in_output(pixels):
    """Share of the converted picture's middle row that the disc covers (red above 40% of
    the disc's middle)."""
    row = pixels[pixels.shape[0] // 2, :, 0].astype(float)
    covered = np.flatnonzero(row > 0.4 * row[row.size // 2])
    return (covered[-1] + 1 - covered[0]) / row.size, (covered[0] + covered[-1] + 1) / 2


@pytest.mark.parametrize("artefact", ARTEFACTS)
def test_the_converted_retina_fills_the_picture_whatever_lies_around_it(tmp_path, artefact):
    picture, _ = photograph(900, 600, 500, artefact, seed=2)
    path = tmp_path / "photograph.jpeg"
    picture.save(path, quality=95)
    decoded = images.decode_file(str(path), images.Decoding(128, 3, True, 10))
    share, centre = disc_width_in_output(decoded.pixels)
    # the disc's rim is at 55% of its middle, so 40% of the middle marks its edge; JPEG's
    # scaling decodes this photograph at 450 x 300, where the search band next to a notch or
    # faint noise (8 pixels) is 3% of the disc
    assert share == pytest.approx(1.0, abs=0.05) and centre == pytest.approx(64, abs=3)
