"""The bootstrap's median (analysis/bootstrap.py ``sorted_median``) is numpy's, bit for bit: every committed CI was
computed with ``np.median`` and ``validate`` recomputes them."""

from __future__ import annotations

import numpy as np
import pytest

from nsa_exp.analysis.bootstrap import percentile_ci, sorted_median


def _samples(rng: np.random.Generator, shape: tuple[int, ...]) -> list[np.ndarray]:
    signed_zeros = rng.choice(np.array([-0.0, 0.0, -1.0, 1.0]), shape)  # the sort and the partition order -0/+0 apart
    infinite = np.where(rng.random(shape) < 0.2, rng.choice(np.array([-np.inf, np.inf]), shape), rng.random(shape))
    return [rng.random(shape) * 5,                                   # distinct values
            np.round(rng.random(shape) * 4) / 4,                      # many ties
            1.7 + rng.standard_normal(shape) * 1e-3,                  # timings: close values, last bits matter
            (1.7 + rng.standard_normal(shape) * 1e-3).astype(np.float32),
            signed_zeros, infinite,
            rng.integers(-3, 4, shape).astype(np.int64)]              # integers (np.median returns float64)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes: -0.0 is not 0.0 here, unlike ``np.array_equal``."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 29, 30, 150, 151])
def test_sorted_median_equals_numpys_bit_for_bit_along_every_axis(n):
    rng = np.random.default_rng(n)
    for x in _samples(rng, (7, n)):
        for axis in (-1, 0, 1):
            assert _same_bits(sorted_median(x, axis=axis), np.median(x, axis=axis)), (x.dtype, n, axis, x)
        assert _same_bits(sorted_median(x[:, ::2]), np.median(x[:, ::2], axis=-1))  # not contiguous
    cube = rng.random((3, 4, n))
    assert all(_same_bits(sorted_median(cube, axis=a), np.median(cube, axis=a)) for a in (0, 1, 2, -1))
    one = rng.random(n)
    assert sorted_median(one) == np.median(one) and type(sorted_median(one)) is type(np.median(one))


@pytest.mark.filterwarnings("ignore:Warning. 'partition' will ignore the 'mask':UserWarning",
                            "ignore:the matrix subclass:PendingDeprecationWarning")
def test_inputs_the_sort_does_not_cover_take_numpys_path():
    """A helper's attack, 2026-12-06: big-endian floats (odd n kept the input's byte order), ``axis=None`` or a
    tuple, an axis out of range, a masked array and a matrix each went the sort's way and differed from np.median."""
    rng = np.random.default_rng(5)
    x = rng.random((3, 5))
    assert _same_bits(sorted_median(x.astype(">f8"), axis=-1), np.median(x.astype(">f8"), axis=-1))
    assert _same_bits(sorted_median(x, axis=None), np.median(x, axis=None))
    assert _same_bits(sorted_median(x, axis=(0, 1)), np.median(x, axis=(0, 1)))
    masked = np.ma.masked_array(x, mask=x > 0.5)
    ours, theirs = sorted_median(masked, axis=-1), np.median(masked, axis=-1)
    assert type(ours) is type(theirs) and np.ma.allequal(ours, theirs)
    assert (np.ma.getmaskarray(ours) == np.ma.getmaskarray(theirs)).all()
    assert _same_bits(np.asarray(sorted_median(np.matrix(x), axis=1)), np.asarray(np.median(np.matrix(x), axis=1)))
    assert _same_bits(sorted_median(x.tolist(), axis=-1), np.median(x.tolist(), axis=-1))
    for bad in (2, -3):
        with pytest.raises(np.exceptions.AxisError):
            sorted_median(x, axis=bad)


def test_nan_and_empty_inputs_take_numpys_path():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    assert np.array_equal(sorted_median(x), np.median(x, axis=-1), equal_nan=True)
    with pytest.warns(RuntimeWarning):
        assert np.isnan(sorted_median(np.array([])))


def test_a_paired_ratio_ci_is_the_one_np_median_gives():
    """The whole bootstrap (scipy, 10,000 resamples, the package's seed) with the sort-based median against the same
    bootstrap with ``np.median``: the same interval to the last bit."""
    from scipy.stats import bootstrap  # noqa: PLC0415

    rng = np.random.default_rng(7)
    num, den = 1.0 + rng.random(40) * 0.05, 0.5 + rng.random(40) * 0.02
    ours = percentile_ci("median_ratio", num, den, paired=True, resamples=2000, seed=11)
    ref = bootstrap((num, den), lambda a, b, axis=-1: np.median(a, axis=axis) / np.median(b, axis=axis),
                    paired=True, n_resamples=2000, confidence_level=0.95, method="percentile",
                    random_state=np.random.default_rng(11)).confidence_interval
    assert ours == (float(ref.low), float(ref.high))
