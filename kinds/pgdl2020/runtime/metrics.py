"""PGDL 2020's task score (conditional mutual information) and Jiang et al.'s rank correlations.

Every function takes the models of one task in one fixed order: ``gaps`` (train accuracy minus
test accuracy), the participant's ``measure`` and ``hparams``, a mapping from each
hyperparameter's name to the array of every model's value of it. Standard library and numpy only
(this module ships in the scoring program).

Conventions shared by the functions:

* "greater" is strict: of two equal values neither is greater (PGDL counted a tie as "-").
* NaN or infinite gaps or measures are refused (``ValueError``): a NaN compares as "not greater"
  with everything and would be scored silently. The scorer decides what an unmeasured model
  costs before calling these.
* The hyperparameter grid must be complete: every combination of the values seen once and
  only once (``ValueError`` otherwise). PGDL's tasks all were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

ENTROPY_EPSILON = 1e-12   # PGDL adds it to the probabilities inside the entropy's log2


def _vector(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected one value per model (a 1-D array), "
                         f"found shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(f"{name}: model {int(bad[0])} (0-based) has the non-finite value "
                         f"{array[bad[0]]}; {bad.size} non-finite in all")
    return array


def _pair(first, second, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a, b = _vector(first, names[0]), _vector(second, names[1])
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} has {a.size} values, {names[1]} has {b.size}")
    if a.size < 2:
        raise ValueError(f"at least two models are needed, found {a.size}")
    return a, b


def _hashable(value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _value_codes(values, order: Sequence | None, name: str) -> tuple[np.ndarray, int]:
    """Each model's value of one hyperparameter as an index 0..size-1: the position in
    ``order`` when given (PGDL's ``possible_values``), else in order of first appearance."""
    index: dict = {}
    if order is not None:
        for value in order:
            index.setdefault(_hashable(value), len(index))
    codes = np.empty(len(values), dtype=np.int64)
    for position, value in enumerate(values):
        key = _hashable(value)
        if key not in index:
            if order is not None:
                raise ValueError(f"hyperparameter {name!r}: model {position} has the value "
                                 f"{value!r}, not among its possible values {list(order)!r}")
            index[key] = len(index)
        codes[position] = index[key]
    return codes, len(index)


def _grid(hparams: Mapping[str, Sequence], n_models: int,
          value_order: Mapping[str, Sequence] | None = None
          ) -> tuple[list[str], dict[str, np.ndarray], dict[str, int]]:
    """Names, value codes and sizes of the hyperparameters, after checking the grid is complete."""
    names = list(hparams)
    codes: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    for name in names:
        values = hparams[name]
        if len(values) != n_models:
            raise ValueError(f"hyperparameter {name!r}: {len(values)} values for {n_models} models")
        order = None if value_order is None else value_order.get(name)
        codes[name], sizes[name] = _value_codes(values, order, name)
    expected = math.prod(sizes.values())
    combinations = {tuple(int(codes[name][m]) for name in names) for m in range(n_models)}
    if len(combinations) != n_models or expected != n_models:
        raise ValueError(f"the hyperparameter grid is not complete and unique: expected "
                         f"{expected} models (one per combination of "
                         f"{' x '.join(str(sizes[n]) for n in names) or 'no'} values), found "
                         f"{n_models} models holding {len(combinations)} distinct combinations")
    return names, codes, sizes


def hyperparameter_grid(hparams: Mapping[str, Sequence], n_models: int
                        ) -> tuple[list[str], dict[str, np.ndarray], dict[str, int]]:
    """The hyperparameters' names, each model's value of each as a code 0..size-1, and their
    sizes; ValueError unless the grid is complete and unique."""
    return _grid(hparams, n_models)


def _greater(values: np.ndarray) -> np.ndarray:
    """n x n booleans: [v_i > v_j] (strict)."""
    return values[:, None] > values[None, :]


def _sign_matrix(values: np.ndarray) -> np.ndarray:
    """n x n integers: sign(v_i - v_j), by comparison (no overflow on huge values)."""
    return _greater(values).astype(np.int8) - (values[:, None] < values[None, :]).astype(np.int8)


def _cmi_ratios(joint_codes: np.ndarray, cell: np.ndarray, n_cells: int,
                pair_weights: np.ndarray | None = None) -> np.ndarray:
    """mean_c MI_c / mean_c H_c for one conditioning set, as PGDL's ``total_mi_from_table``,
    for each of D zoos at once.

    ``joint_codes`` (D x n x n) is 2*[not A] + [not B] (PGDL's table axes: "+gap" is index 0
    and "+measure" index 0); ``cell`` (n x n) the conditioning cell of each ordered pair;
    ``pair_weights`` (n x n, or D x n x n: positive) count each pair by its weight instead of
    once.
    """
    draws = joint_codes.shape[0]
    slots = (np.arange(draws)[:, None, None] * (4 * n_cells) + 4 * cell) + joint_codes
    weights = None if pair_weights is None else np.broadcast_to(pair_weights, slots.shape)
    counts = np.bincount(slots.ravel(), minlength=4 * n_cells * draws,
                         weights=None if weights is None else weights.ravel())
    # The table's axes first, (a, b, D, cells): every entry below is then a contiguous
    # (D, cells) array, which numpy's arithmetic runs through faster than the strided ones of
    # the (D, cells, a, b) layout; each number is computed as before.
    counts = np.moveaxis(counts.reshape(draws, n_cells, 2, 2), (2, 3), (0, 1)).astype(
        np.float64, order="C")
    # The sums over the 2 x 2 table written out: numpy's reductions over such short axes cost
    # more than the arithmetic, and these adds are in the order its sum(axis=(2, 3)) takes.
    row_sums = counts[:, 0] + counts[:, 1]                       # (a, D, cells)
    # pairs in each cell (all > 0: complete grid)
    total = (row_sums[0] + counts[1, 0]) + counts[1, 1]
    joint = counts / total
    p_a = row_sums / total                                       # gap order, marginal
    p_b = (counts[0] + counts[1]) / total                        # measure order, marginal
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = joint * np.log2(joint / (p_a[:, None] * p_b[None, :]))
    terms = np.where(joint > 0, terms, 0.0)              # PGDL skips empty joint entries
    # PGDL adds the four terms in the order (+,+), (+,-), (-,+), (-,-) to 0.0.
    mi = ((terms[0, 0] + terms[0, 1]) + terms[1, 0]) + terms[1, 1]
    logs = np.log2(p_a + ENTROPY_EPSILON)
    entropy = -(p_a[0] * logs[0] + p_a[1] * logs[1])
    # PGDL sums the cells one after the other, in cell order: cumsum adds the same way.
    mean_mi = np.cumsum(mi, axis=-1)[:, -1] / n_cells
    mean_entropy = np.cumsum(entropy, axis=-1)[:, -1] / n_cells
    with np.errstate(divide="ignore", invalid="ignore"):
        return mean_mi / mean_entropy


def _joint_codes(gaps: np.ndarray, measure: np.ndarray) -> np.ndarray:
    """2*[not g_i > g_j] + [not mu_i > mu_j] for each zoo (rows of ``gaps`` and ``measure``)."""
    # Small integers (0..3) in one byte each: four times less memory to pass than int64.
    return 2 * (~_greater_rows(gaps)).view(np.uint8) + (~_greater_rows(measure)).view(np.uint8)


def _greater_rows(values: np.ndarray) -> np.ndarray:
    """D x n x n booleans: [v_i > v_j] within each row of ``values`` (D x n)."""
    return values[:, :, None] > values[:, None, :]


def _conditioning_cells(conditioning: Sequence[str], codes: dict[str, np.ndarray],
                        sizes: dict[str, int], n: int) -> tuple[np.ndarray, int]:
    """Each ordered pair's cell (h1_i, h1_j, h2_i, h2_j, ...) and the number of cells."""
    cell = np.zeros((n, n), dtype=np.int64)
    n_cells = 1
    for name in conditioning:
        size, code = sizes[name], codes[name]
        cell = (cell * size + code[:, None]) * size + code[None, :]
        n_cells *= size * size
    return cell, n_cells


def _conditionings(names: list[str]) -> list[tuple[str, ...]]:
    """The sets the score conditions on: every ordered pair of distinct hyperparameters, in
    the order of ``names``; with fewer than two hyperparameters, all of them at once."""
    if len(names) < 2:
        return [tuple(names)]
    return [(first, second) for first in names for second in names if first != second]


def conditional_mutual_information(gaps, measure, hparams: Mapping[str, Sequence], *,
                                   value_order: Mapping[str, Sequence] | None = None,
                                   weights: np.ndarray | None = None
                                   ) -> tuple[float, tuple[str, str] | None]:
    """PGDL 2020's task score: the smallest conditional mutual information between the order
    of the generalisation gaps and the order of the measure, and the pair of hyperparameters
    that gives it.

    Over all ordered pairs of models (i, j), **including i = j**,
    A = [g_i > g_j] and B = [mu_i > mu_j] (strict). For every ordered pair (h1, h2) of distinct
    hyperparameters the pairs of models are split into the cells
    c = (h1_i, h1_j, h2_i, h2_j) (|h1|^2 |h2|^2 cells, all of the same size in a complete grid)
    and, with probabilities counted within each cell,

        MI_c = sum_{a,b} p(a,b) log2( p(a,b) / (p(a) p(b)) )      (terms with p(a,b) = 0: 0)
        H_c  = -sum_a p(a) log2( p(a) + 1e-12 )
        score(h1, h2) = (sum_c MI_c / K) / (sum_c H_c / K)        (K cells)

    and the task score is min over (h1, h2) of score(h1, h2).

    Reproducing PGDL's numbers: the 1e-12 is added to p(a) inside the log of the entropy
    only, never in MI_c (as PGDL's ``entropy`` and ``mi_from_table`` do). A cell where every
    pair has the same A therefore has H_c = -log2(1 + 1e-12) ~ -1.44e-12, not 0, and a
    measure carrying no information in any cell scores 0 / (negative tiny) = -0.0 rather than
    NaN, as PGDL's did. The four MI terms are added in PGDL's order and the cells are summed
    one after another; pass ``value_order`` (each hyperparameter's ``possible_values``) to
    enumerate the cells in PGDL's order too, and the result matches PGDL's to the last bit or
    two (np.log2 on arrays may round differently from the scalar path). PGDL keyed cells by
    concatenating str(value)s, which can merge distinct cells (values "1", "11"); we key them
    by the values themselves, which is the same whenever that concatenation is unambiguous.

    Consequences worth knowing:

    * With exactly two hyperparameters every cell holds one pair of models, so MI_c = 0 and
      every measure, even mu = g, scores -0.0: the score needs a third hyperparameter to vary
      within the cells. PGDL's tasks had five or more.
    * The score does not reward the direction of the measure. mu = -g makes B = not A on
      every pair i != j, so in every cell without i = j pairs MI_c = H_c, as for mu = g; only
      the cells with h1_i = h1_j and h2_i = h2_j hold the i = j pairs (A = B = 0), where
      MI_c < H_c. The inverse measure thus scores below 1 but far above 0.
    * Ties in the measure count as "not greater" both ways, so a constant measure scores 0.

    ``weights`` (one positive number per model): each ordered pair counts w_i w_j in its cell
    instead of once (Rubin's Bayesian bootstrap over the networks reweighs them so; the
    scorer's standard errors retrain the zoo instead, ``retraining.py``: a reweighing of
    fixed networks misses their training noise).

    One hyperparameter: the cells are (h_i, h_j) and the pair returned is None. No
    hyperparameter: one cell (plain MI / H), pair None. Ties between pairs: the first pair in
    the order of ``hparams`` wins. A pair whose ratio is NaN (0/0, which the 1e-12 makes all but
    impossible) is skipped; if all are, the result is (nan, None).
    """
    g, mu = _pair(gaps, measure, ("gaps", "measure"))
    names, codes, sizes = _grid(hparams, g.size, value_order)
    joint_codes = _joint_codes(g[None], mu[None])
    pair_weights = _pair_weights(weights, g.size)
    conditionings = _conditionings(names)
    if len(names) < 2:
        cell, n_cells = _conditioning_cells(conditionings[0], codes, sizes, g.size)
        return float(_cmi_ratios(joint_codes, cell, n_cells, pair_weights)[0]), None
    best, best_pair = math.nan, None
    for pair in conditionings:
        cell, n_cells = _conditioning_cells(pair, codes, sizes, g.size)
        score = float(_cmi_ratios(joint_codes, cell, n_cells, pair_weights)[0])
        if not math.isnan(score) and (best_pair is None or score < best):
            best, best_pair = score, pair
    return best, best_pair


# Zoos scored at once by the functions "of draws" hold at most this many ordered pairs of
# networks (draws x n x n), about 16 MB in each array of pair codes: large zoos go in chunks.
PAIRS_AT_ONCE = 2_000_000


def _chunks(draws: int, n: int) -> list[slice]:
    step = max(1, PAIRS_AT_ONCE // (n * n))
    return [slice(start, min(start + step, draws)) for start in range(0, draws, step)]


def _draw_matrices(gaps, measure, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(gaps, dtype=np.float64)
    b = np.asarray(measure, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] < 2:
        raise ValueError(f"{names[0]} and {names[1]}: expected two arrays of the same shape, "
                         f"draws x models (at least two), found {a.shape} and {b.shape}")
    return a, b


def cmi_of_draws(gaps, measure, hparams: Mapping[str, Sequence], *,
                 value_order: Mapping[str, Sequence] | None = None,
                 weights: np.ndarray | None = None) -> np.ndarray:
    """``conditional_mutual_information``'s score for each of D zoos of the same grid: row d
    of ``gaps`` and ``measure`` (D x n) is one zoo's, and of ``weights`` (D x n, positive;
    None: every network once) its networks' weights. The minimum over pairs of
    hyperparameters skips a NaN ratio, as the single score does (NaN where all are)."""
    g, mu = _draw_matrices(gaps, measure, ("gaps", "measure"))
    names, codes, sizes = _grid(hparams, g.shape[1], value_order)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != g.shape or not np.all(weights > 0):
            raise ValueError(f"weights: expected {g.shape[0]} x {g.shape[1]} positive numbers")
    cells = [_conditioning_cells(c, codes, sizes, g.shape[1]) for c in _conditionings(names)]
    scores = np.empty(g.shape[0])
    for chunk in _chunks(g.shape[0], g.shape[1]):
        joint_codes = _joint_codes(g[chunk], mu[chunk])
        pair_weights = (None if weights is None else
                        weights[chunk, :, None] * weights[chunk, None, :])
        ratios = [_cmi_ratios(joint_codes, cell, n_cells, pair_weights)
                  for cell, n_cells in cells]
        with np.errstate(invalid="ignore"):
            scores[chunk] = np.fmin.reduce(ratios, axis=0)
    return scores


def _pair_weights(weights: np.ndarray | None, n: int) -> np.ndarray | None:
    """w_i w_j for every ordered pair of models: a model of weight w counts as w models (the
    Bayesian bootstrap over the zoo reweighs its networks; None: every model once)."""
    if weights is None:
        return None
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n,) or not np.all(weights > 0):
        raise ValueError(f"weights: expected {n} positive numbers, one per model")
    return weights[:, None] * weights[None, :]


def kendall_tau(measure, gaps, weights: np.ndarray | None = None) -> float:
    """Kendall's rank correlation as Jiang et al. (2019) define it (tau-a, not scipy's tau-b):

        tau = 2 / (n (n - 1)) * sum_{i < j} sign(mu_i - mu_j) sign(g_i - g_j)

    A tie on either side contributes 0 to the sum but still counts in n(n-1)/2. With model
    weights each pair counts w_i w_j: tau = sum_{i<j} w_i w_j s_ij / sum_{i<j} w_i w_j.
    """
    mu, g = _pair(measure, gaps, ("measure", "gaps"))
    n = mu.size
    products = _sign_matrix(mu).astype(np.int64) * _sign_matrix(g)
    pair_weights = _pair_weights(weights, n)
    if pair_weights is None:
        return float(np.triu(products, 1).sum() * 2 / (n * (n - 1)))
    return float(np.triu(products * pair_weights, 1).sum() / np.triu(pair_weights, 1).sum())


def granulated_kendall(measure, gaps, hparams: Mapping[str, Sequence],
                       weights: np.ndarray | None = None) -> dict[str, float]:
    """Jiang et al. (2019)'s granulated Kendall coefficients.

    For each hyperparameter k, the models are grouped by their values of all the *other*
    hyperparameters (each group: models that differ only in k; |k| models in a complete grid),
    tau (``kendall_tau``) is computed within each group, and

        psi_k = mean over the groups of tau(group)
        Psi   = mean over k of psi_k                        (key "overall")

    Returns ``{name: psi_k, ..., "overall": Psi}`` with the names in the order of ``hparams``.
    A hyperparameter with a single value has no pairs to rank, so it gets no psi and is left
    out of Psi. A hyperparameter named "overall" is refused (ValueError), as is a grid with no
    hyperparameter of two or more values. With model weights each pair within a group counts
    w_i w_j, as in ``kendall_tau``, and each group counts by its pairs' weight
    (``_group_mean``).
    """
    mu, g = _pair(measure, gaps, ("measure", "gaps"))
    if "overall" in hparams:
        raise ValueError('a hyperparameter named "overall" clashes with the key of the mean')
    names, codes, sizes = _grid(hparams, mu.size)
    products = _sign_matrix(mu).astype(np.int64) * _sign_matrix(g)
    pair_weights = _pair_weights(weights, mu.size)
    upper = np.triu(np.ones((mu.size, mu.size), dtype=bool), 1)
    result: dict[str, float] = {}
    for name in names:
        if sizes[name] < 2:
            continue
        group = np.zeros(mu.size, dtype=np.int64)
        for other in names:
            if other != name:
                group = group * sizes[other] + codes[other]
        same = upper & (group[:, None] == group[None, :])
        n_groups = int(group.max()) + 1
        in_group = np.broadcast_to(group[:, None], same.shape)[same]
        counted = products if pair_weights is None else products * pair_weights
        sums = np.bincount(in_group, weights=counted[same], minlength=n_groups)
        if pair_weights is None:
            members = np.bincount(group, minlength=n_groups)
            pairs = members * (members - 1) / 2
        else:
            pairs = np.bincount(in_group, weights=pair_weights[same], minlength=n_groups)
        ranked = pairs > 0
        result[name] = _group_mean(sums[ranked], pairs[ranked], pair_weights is None)
    if not result:
        raise ValueError("no hyperparameter has two or more values: nothing to rank")
    result["overall"] = float(np.mean(list(result.values())))
    return result


def _group_mean(sums: np.ndarray, pairs: np.ndarray, unweighted: bool) -> float:
    """psi over the groups: the mean of their taus (sums / pairs) unweighted, as Jiang et al.
    define it; with model weights each group counts by its pairs' weight, sum(sums) /
    sum(pairs). (A group of two networks holds one pair, whose weight would cancel from its
    own tau: weighting the groups equally would leave psi unmoved by any reweighing, its
    Bayesian-bootstrap spread 0. In a complete grid every group has as many pairs, so both
    agree with equal weights.)"""
    if unweighted:
        return float(np.mean(sums / pairs))
    return float(sums.sum() / pairs.sum())


def _sign_products(measure: np.ndarray, gaps: np.ndarray, first: np.ndarray,
                   second: np.ndarray) -> np.ndarray:
    """sign(mu_i - mu_j) sign(g_i - g_j) of the pairs (first[k], second[k]), in each row."""
    return (np.sign(measure[:, first] - measure[:, second])
            * np.sign(gaps[:, first] - gaps[:, second]))


def kendall_tau_of_draws(measure, gaps) -> np.ndarray:
    """``kendall_tau`` (tau-a) for each of D zoos: row d of ``measure`` and ``gaps`` (D x n)."""
    mu, g = _draw_matrices(measure, gaps, ("measure", "gaps"))
    first, second = np.triu_indices(mu.shape[1], 1)
    return np.concatenate([_sign_products(mu[chunk], g[chunk], first, second).mean(axis=1)
                           for chunk in _chunks(*mu.shape)])


def granulated_kendall_of_draws(measure, gaps, hparams: Mapping[str, Sequence]) -> np.ndarray:
    """``granulated_kendall``'s "overall" for each of D zoos of the same grid (rows of
    ``measure`` and ``gaps``, D x n). In a complete grid every group of one hyperparameter
    holds as many pairs, so psi_k is the mean over all its groups' pairs."""
    mu, g = _draw_matrices(measure, gaps, ("measure", "gaps"))
    if "overall" in hparams:
        raise ValueError('a hyperparameter named "overall" clashes with the key of the mean')
    names, codes, sizes = _grid(hparams, mu.shape[1])
    pairs = [_within_groups(name, names, codes, sizes) for name in names if sizes[name] >= 2]
    if not pairs:
        raise ValueError("no hyperparameter has two or more values: nothing to rank")
    return np.concatenate([
        np.mean([_sign_products(mu[chunk], g[chunk], *pair).mean(axis=1) for pair in pairs],
                axis=0)
        for chunk in _chunks(*mu.shape)])


def _within_groups(name: str, names: list[str], codes: dict[str, np.ndarray],
                   sizes: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i < j) of networks that differ in ``name`` only."""
    group = np.zeros(len(codes[name]), dtype=np.int64)
    for other in names:
        if other != name:
            group = group * sizes[other] + codes[other]
    same = np.triu(group[:, None] == group[None, :], 1)
    return np.nonzero(same)
