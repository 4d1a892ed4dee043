"""Nadaraya-Watson estimators with the bandwidth chosen from a grid by cross-validation.

They compose like :class:`~sklearn.linear_model.RidgeCV`: ``fit`` routes the metadata,
builds a grid search (:class:`~sklearn_nw._selection_grid.BandwidthGridSearch`) that
holds the grid, the splitter, the scorer and the metadata, and hands it to the plain
estimator's fit path as its bandwidth strategy: ``select(training)`` returns the choice
and the search's results, which the fit path stores as every strategy's
(:mod:`sklearn_nw._selection`).
"""

from numbers import Integral
from typing import ClassVar

from sklearn.base import (
    _fit_context,
    is_classifier,
)
from sklearn.metrics import check_scoring, get_scorer, get_scorer_names
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _raise_for_params,
    _routing_enabled,
    process_routing,
)

from ._classification import NadarayaWatsonClassifier
from ._docs import ATTRIBUTES, LEAVE_ONE_OUT, PARAMETERS, entries
from ._regression import NadarayaWatsonRegressor
from ._selection_grid import FAMILIES, BandwidthGridSearch
from ._validation import NumberInterval, check_combinations
from .bandwidth import UNITS


def _search_constraints(plain_class):
    """The plain estimator's parameter constraints, ``bandwidth`` replaced by the search's."""
    constraints = {k: v for k, v in plain_class._parameter_constraints.items()
                   if k not in ("bandwidth", "metric")}
    constraints.update({
        "bandwidths": [NumberInterval(Integral, 1, None, closed="left"), "array-like", None],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "bandwidth_kinds": [StrOptions({"auto"}), list, tuple],
        "selection": [StrOptions({"one_se", "min"})],
        "leave_out": [StrOptions(set(UNITS))],
    })
    if "degree" in constraints:  # the regressor: a degree, or the best by the search
        constraints["degree"] = [*constraints["degree"], StrOptions({"auto"})]
    return constraints


# -- what the two CV estimators share: fit, metadata routing and the scorer ----------------

_FIT_DOC = """Choose the bandwidth from the grid, then store the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets; for the classifier, class labels of shape (n_samples,), of any type
            ``numpy.unique`` can sort.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative frequency weights: an integer weight equals repeating the row.
            Without metadata routing they also go to the scorer when it takes
            ``sample_weight``; with routing, to the scorer and the splitter when they
            request them.
        groups : array-like of shape (n_samples,), default=None
            Group labels of the samples. With ``cv=None`` the exact leave-one-out
            becomes leave-one-*group*-out: each row is predicted without every row of
            its group, as :class:`~sklearn.model_selection.LeaveOneGroupOut` refits
            would predict it, in the same single pass (fixed bandwidths only: with
            ``bandwidth_kinds="auto"`` the adaptive ones are left out, asked for by name
            they raise, as ``n_neighbors`` does). With a splitter they go to its
            ``split``, as :class:`~sklearn.model_selection.GridSearchCV` sends them
            (with routing, when the splitter requests them). To pass them through
            ``cross_validate(..., params={"groups": g})`` with routing, request them
            with ``set_fit_request(groups=True)``. See :ref:`the user guide <leave_out>`.
        **params : dict
            Metadata for the scorer and the splitter.

            Only available if ``enable_metadata_routing=True``, which can be set by using
            ``sklearn.set_config(enable_metadata_routing=True)``. See
            scikit-learn's `metadata routing user guide
            <https://scikit-learn.org/stable/metadata_routing.html>`_ for more details.

        Returns
        -------
        self : object
            The fitted estimator.

        Notes
        -----
        With ``cv=None`` the sample weights are frequency weights of the leave-one-out
        predictions and weigh the default score; with a splitter they weigh each split's
        fit, and its score when the scorer takes them. So the chosen bandwidth may differ
        between the two, as for :class:`~sklearn.linear_model.RidgeCV`.
        """

_ROUTING_DOC = """Get metadata routing of this object.

        See scikit-learn's `metadata routing user guide
        <https://scikit-learn.org/stable/metadata_routing.html>`_ on how the routing
        mechanism works.

        Returns
        -------
        routing : MetadataRouter
            A :class:`~sklearn.utils.metadata_routing.MetadataRouter` encapsulating
            routing information: this estimator's ``fit``, the scorer's ``score`` and the
            splitter's ``split``.
        """


def _fit_with_grid_search(estimator, X, y, sample_weight, groups, params):
    """``fit`` of a CV estimator, as RidgeCV's: route the metadata, build the grid search
    and fit the plain estimator's way with it as the bandwidth strategy. ``groups`` are
    the exact leave-one-out's unit (``cv=None``), or the splitter's, as GridSearchCV's
    (sent to its ``split`` without routing, routed to it with routing)."""
    _raise_for_params(params, estimator, "fit")
    if sample_weight is not None:
        params = {**params, "sample_weight": sample_weight}
    if groups is not None:
        params = {**params, "groups": groups}
    routed = process_routing(estimator, "fit", **params) if _routing_enabled() else None
    if estimator.cv is None:  # the leave-one-out's own; the splitter gets none
        params = {k: v for k, v in params.items() if k != "groups"}
    else:
        if (groups is not None and routed is not None
                and "groups" not in routed.splitter.split):
            raise TypeError(
                f"groups were passed to {type(estimator).__name__}.fit but are not routed "
                f"to any object: cv={estimator.cv!r} does not request them (with cv=None "
                "they are the exact leave-one-out's unit).")
        groups = None
    # The plain estimator with every parameter the two share (the regressor's degree; its
    # degree is set for each candidate when the search chooses it; the candidates' fits
    # keep no leave-one-out state).
    shared = (set(estimator._plain_class().get_params(deep=False))
              & set(estimator.get_params(deep=False)) - {"degree", "store_loo"})
    plain = estimator._plain_class(**{k: getattr(estimator, k) for k in sorted(shared)})
    degree = getattr(estimator, "degree", 0)
    kinds = _check_kinds(estimator)
    if _routing_enabled():  # groups are the splitter's, never the splits' fits'
        plain.set_fit_request(sample_weight=True, groups=False)
    search = BandwidthGridSearch(
        estimator.bandwidths, cv=estimator.cv,
        # cv=None with the default scoring ranks by the weighted leave-one-out loss.
        scorer=(None if estimator.cv is None and estimator.scoring is None
                else _get_scorer(estimator)),
        estimator=plain, params=params, routed=routed,
        # Only named in a warning about sample weights.
        owner=None if sample_weight is None else str(estimator), degree=degree,
        kinds=kinds, bounded=bool(getattr(estimator, "bounded", False)),
        selection=estimator.selection, leave_out=estimator.leave_out,
    )
    return estimator._fit(X, y, sample_weight, classifier=is_classifier(estimator),
                          search=search, degree=degree, groups=groups)


def _check_kinds(estimator):
    """``bandwidth_kinds`` as the search takes it ("auto", or a tuple of kinds), with the
    parameters adaptive bandwidths cannot go with refused (the table of
    :mod:`sklearn_nw._validation`)."""
    kinds = estimator.bandwidth_kinds
    if kinds == "auto":
        return "auto" if estimator.n_neighbors is None else ("fixed",)
    if not kinds or any(kind not in FAMILIES for kind in kinds) or len(set(kinds)) < len(
            kinds):
        raise ValueError(
            f"bandwidth_kinds must be 'auto' or distinct kinds among {FAMILIES}; got "
            f"{kinds!r}."
        )
    check_combinations(estimator, "local search")
    return tuple(kinds)


def _metadata_routing(estimator):
    """As RidgeCV's: to the estimator's own fit, the scorer's ``score`` and the splitter's
    ``split``."""
    return (
        MetadataRouter(owner=estimator)
        .add_self_request(estimator)
        .add(
            scorer=_get_scorer(estimator),
            method_mapping=MethodMapping().add(caller="fit", callee="score"),
        )
        .add(
            splitter=estimator.cv,
            method_mapping=MethodMapping().add(caller="fit", callee="split"),
        )
    )


def _get_scorer(estimator):
    """The scorer of ``scoring``.

    With routing on, the default scores (the weighted loss of the leave-one-out
    predictions, or the estimator's ``score`` on each split) use ``sample_weight``
    whenever it is given, so the default scorer requests it, as in RidgeCV.
    """
    if _routing_enabled() and estimator.scoring is None:
        return get_scorer(estimator._default_scoring).set_score_request(sample_weight=True)
    return check_scoring(estimator, scoring=estimator.scoring, allow_none=True)


_SHARED_DOC = r"""
    Parameters
    ----------
    bandwidths : int, array-like of shape (n_bandwidths,) or (n_bandwidths, n_features), default=None
        The grid of fixed bandwidths: scalar bandwidths, or per-feature bandwidth vectors.
        An int ``m`` means ``m`` multiples of Scott's rule, geometrically spaced from 1/8
        to 8; None means 25. Such a default grid is searched, not scored at every point:
        every fourth point (its ends among them), then the points around the best one
        and, with ``selection="one_se"``, from the best one up to the first more than 3
        standard errors short of it (``cv_results_`` lists the candidates scored). A
        best point at one of its ends goes on past it, 8 points at a time at the same
        ratio, up to 4 times (to 1/2048 or 2048 times Scott's rule), and the grid is
        probed below, every 8 points of its ratio down to the median input's
        nearest-neighbor distance (a series' best bandwidth can lie there, past a local
        minimum near Scott's rule); the regressor's local polynomials place theirs by
        Nadaraya-Watson's best (see ``degree``); a given grid is scored at every point. With categorical features the default grid is multiples of the learned per-feature bandwidths
        (``bandwidth="loo"``'s, a bandwidth per continuous feature and a smoothing per
        categorical one) instead of Scott's rule, and a given grid holds the smoothing
        ``lambda`` at the categorical positions.
    kernel : str, Kernel or callable, default="gaussian"
        As in the plain estimator.
    bandwidth_kinds : "auto" or list of {{"fixed", "balloon", "sample_point"}}, default="auto"
        The kinds of bandwidth searched: the fixed grid, and
        :class:`~sklearn_nw.AdaptiveBandwidth` of either kind, with k nearest neighbors
        (units of sample weight) 1, 2, 4, ..., 64 (up to what the data hold) and scale c
        1/4, 1/2, 1, all in the metric of Scott's rule; a best point at the largest k, or
        at either end of c, goes on past it (k doubled, c halved or doubled) up to 4
        times, while it beats every candidate of the kinds searched before it (past the
        grid's edges adaptive bandwidths tend to the fixed ones, k large and c small).
        The kinds are searched one after the other, fixed first, and chosen
        between as ``selection`` says. ``"auto"``: all three with ``cv=None``, the
        default grid and up to 4,096 leave-one-out keys (distinct rows under
        ``leave_out="row"``, distinct inputs under ``"input"``; the exact leave-one-out
        of adaptive bandwidths holds dense matrices of them) whose six dense (L, L)
        float64 matrices fit in scikit-learn's
        ``working_memory``, without ``n_neighbors``; otherwise fixed bandwidths only.
        Adaptive kinds asked for by name whose matrices do not fit raise a ValueError
        that says how much memory, or how few distinct inputs, would. Adaptive
        bandwidths count sample weights as repeated rows: unlike the fixed grid's scores,
        theirs change when every weight is scaled.
    cv : int, cross-validation generator or iterable, default=None
        None: exact leave-one-out for every grid point, in one pass over the distance
        blocks (the distances are computed once and shared by all bandwidths), with sample
        weights as frequency weights. Otherwise scikit-learn's splitters, through
        :class:`~sklearn.model_selection.GridSearchCV`.
    scoring : str or callable, default=None
        None: with ``cv=None`` {default_score} of the leave-one-out predictions; with a
        splitter the estimator's ``score``. A scorer name or callable is applied to the
        leave-one-out predictions (``cv=None``) or to each split.
    n_neighbors : int, default=None
        As in the plain estimator. The leave-one-out scores are those of the model
        ``predict`` uses: each training point is predicted from its nearest other inputs
        holding ``n_neighbors`` units of sample weight (the last one in part), as a refit
        without it would predict; points equally near are taken in the search's order,
        as in the plain estimator.
    algorithm : {{"auto", "brute", "kd_tree", "ball_tree", "cell_list"}}, default="auto"
        As in the plain estimator.
    compute : {{"auto", "eager", "compiled"}}, default="auto"
        As in the plain estimator.
    device : str, default="cpu"
        Torch device, as in the plain estimator.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The chosen bandwidth (a row of ``bandwidths_``); for an adaptive one, the metric
        its distances are measured in (Scott's rule).
    bandwidths_ : ndarray of shape (n_candidates, n_features)
        Every candidate's bandwidth vector (the rows of ``cv_results_["param_bandwidth"]``):
        the grid with the extensions of a default grid; for adaptive candidates their
        metric.
    best_score_ : float
        Score of the chosen candidate (always finite).
    best_index_ : int
        Its index in ``cv_results_``. With ``selection="one_se"`` the chosen candidate
        need not rank first in ``cv_results_["rank_test_score"]``.
    best_params_ : dict
        The chosen candidate, ``cv_results_["params"][best_index_]``: ``"bandwidth"`` and
        ``"kind"``, for an adaptive bandwidth ``"n_neighbors"`` and ``"scale"``, and for
        the regressor ``"degree"``.
    cv_results_ : dict of 1-D arrays and a list
        One entry per candidate, as :class:`~sklearn.model_selection.GridSearchCV`'s
        (``pandas.DataFrame(cv_results_)`` makes a table of them):

        - ``"param_bandwidth"``: masked object array of the bandwidth vectors, each of
          shape (n_features,) (a row of ``bandwidths_``).
        - ``"params"``: list of dicts, each candidate's parameters as ``best_params_``
          holds them. The plain estimator of candidate ``p`` has
          ``bandwidth=p["bandwidth"]`` (fixed), or
          ``bandwidth=AdaptiveBandwidth(p["kind"], n_neighbors=p["n_neighbors"],
          scale=p["scale"], base=p["bandwidth"])``, and ``degree=p["degree"]``.
        - ``"mean_test_score"``: the score; with ``cv=None`` and ``scoring=None`` the
          negative loss in the targets' unit, exact wherever float64 holds it (-inf
          where the regressor's mean squared error exceeds float64's range, -0.0 where it
          falls below its smallest number; the candidates are ranked on the scaled
          targets, so the ranking and the choice hold all the same).
        - ``"rank_test_score"``: 1 for the best score, ties in the candidates' order; a
          non-finite score (a candidate whose fits or scores failed) ranks last, tied
          with the others, as in GridSearchCV, and is never chosen (an error when every
          candidate has one).
        - ``"kind"``, ``"n_neighbors"`` and ``"scale"`` when adaptive bandwidths are
          searched (the latter two masked for fixed bandwidths), ``"degree"`` with
          ``degree="auto"``.
        - with a splitter, the per-split scores and timings of GridSearchCV. Warnings
          of the candidates' fits come once per message, with their count.
"""  # noqa: E501 (a numpydoc type line is one line)

_DEGREE_DOC = """    degree : {0, 1, 2} or "auto", default="auto"
        As in :class:`NadarayaWatsonRegressor`: the degree of the local polynomials. With
        ``cv=None`` each grid point is scored by exact leave-one-out local fits, computed
        in blocks of rows within scikit-learn's ``working_memory`` (a ValueError when one
        row of them does not fit). ``"auto"`` searches the grid for degrees 0 and 1, and
        2 up to two features, each while its design has at most a tenth as many terms as
        there are samples, no more terms than ``n_neighbors`` (k nearest identify at
        most k), (samples x terms)^2 stays below 5e7 (the exact leave-one-out fits' cost
        per grid point) and one row of its fits fits in ``working_memory``;
        ``cv_results_["degree"]`` lists each candidate's. With the default grid
        (``bandwidths`` None or an int) and fixed bandwidths of degree 0 searched first,
        a local polynomial's grid starts at half their best point (a local polynomial's
        best bandwidth is rarely below Nadaraya-Watson's): the default grid's points from
        there on; for a best point below the default grid (a series with a short
        period), half to 8 times it, probed once at the default grid's end; searched and
        extended as any default grid, not probed below. Adaptive bandwidths are tried
        with local polynomials (``"auto"``) only while (samples x terms)^2 stays below
        5e6: their candidates outnumber the fixed grid's; a higher degree is kept as
        ``selection`` says.
    bounded : bool, default=True
        As in :class:`NadarayaWatsonRegressor` (whose default is False): each local fit
        kept within the range of the targets that carry its weight, in ``predict`` and
        in the leave-one-out fits that choose the degree and bandwidth. On by default:
        one query beyond the training inputs can cost an unbounded local-linear fit more
        squared error than all the others (an extreme income in statsmodels' engel data,
        whose food expenditure grows slower than linearly)."""

_SELECTION_DOC = """    selection : {"one_se", "min"}, default="one_se"
        How the candidate is chosen. ``"one_se"``: Breiman's one-standard-error rule
        wherever the scores come per sample (the leave-one-out loss of each distinct
        training input, the regressor's default score) or per split (a splitter). Within
        each family (a kind of bandwidth, and for the regressor a degree) the smoothest
        candidate (the largest bandwidth, or the largest k c of an adaptive one) whose
        score is within one standard error of the family's best, the others being the
        data's noise; and a family is kept over the simpler one kept before it only if
        its choice beats that one's by more than one standard error, as
        :class:`~sklearn_nw.LeaveOneOutBandwidth` keeps per-feature bandwidths. Without
        per-sample scores (the classifier's default leave-one-out log-loss, or a
        ``scoring`` of the leave-one-out predictions) the best candidate of all.
        ``"min"``: the best candidate of all (the first on ties), as GridSearchCV.
    leave_out : {"row", "input"}, default="row"
        The unit the exact leave-one-out of ``cv=None`` leaves out: a training row with
        its whole sample weight, as :class:`~sklearn.model_selection.LeaveOneOut` (other
        rows at the same input stay and help predict it), or every row at the left-out
        row's input (as a query at a new input is predicted; copies of a row, such as a
        bootstrap drawn as rows, never predict it). The two are the same where no input
        repeats. Unused with a splitter. See :ref:`the user guide <leave_out>`.
""" + entries(PARAMETERS, "categorical_features", "categorical_kernel").replace(
    "{", "{{").replace("}", "}}")  # _SHARED_DOC is formatted

# The rule that chooses among the candidates, and where it comes from.
_NOTES_DOC = r"""
    Notes
    -----
    With ``cv=None`` each candidate is scored by its exact leave-one-out loss, every
    training point predicted from the others,

    .. math::

        L = \frac{1}{W} \sum_i w_i\, \ell_i, \qquad
        \ell_i = \ell\big(y_i, \hat f_{-i}(x_i)\big), \qquad W = \sum_i w_i,

    for all candidates in one pass over the distance blocks, as
    :class:`~sklearn.linear_model.RidgeCV` does for its alphas.

    With ``selection="one_se"`` the candidate is chosen by the one-standard-error rule
    [1]_ [2]_: candidates whose losses differ by less than the noise of that estimate are
    not told apart, and the smoothest of them is kept. Candidate :math:`b` is within one
    standard error of the best one, :math:`a`, when the mean of the per-sample
    differences :math:`g_i = \ell_i^{(b)} - \ell_i^{(a)}` is at most their standard
    error,

    .. math::

        \bar g \le \frac{\sqrt{\sum_i w_i (g_i - \bar g)^2}}{\sum_i w_i}, \qquad
        \bar g = \frac{\sum_i w_i g_i}{\sum_i w_i}.

    Within each family (fixed bandwidths, each kind of adaptive bandwidth, and for the
    regressor each degree) the largest bandwidth so within is the family's choice; then
    a family is kept over the simpler one kept before it only if its choice beats that
    one's by more than one standard error. The chosen bandwidth is then often larger than
    the one of least loss, which ``selection="min"`` chooses (``best_index_`` need not
    rank first in ``cv_results_["rank_test_score"]``). With a splitter the per-split
    scores play the per-sample losses' part.

    References
    ----------
    .. [1] L.\  Breiman, J. H. Friedman, R. A. Olshen and C. J. Stone, *Classification
       and Regression Trees*, Wadsworth, 1984 (the one-standard-error rule).
    .. [2] T.\  Hastie, R. Tibshirani and J. Friedman, *The Elements of Statistical
       Learning*, 2nd ed., Springer, 2009, section 7.10.
"""

# The regressor's standard errors (predict(X, return_std=True)), as the plain one's.
_RESIDUAL_DOC = entries(PARAMETERS, "residual_variance", "residual_neighbors", "store_loo")

# The plain estimators' fitted attributes that the CV estimators share.
_FITTED = entries(ATTRIBUTES, "bandwidth_kind_", "bandwidth_neighbors_", "bandwidth_scale_",
                 "key_bandwidths_", "kernel_", "device_", "X_fit_", "route_", "key_set_",
                  "sample_weight_", "attention_weights_", "n_features_in_",
                  "feature_names_in_", "is_categorical_")


class NadarayaWatsonRegressorCV(NadarayaWatsonRegressor):
    __doc__ = (
        """Nadaraya-Watson regression with the bandwidth chosen from a grid by cross-validation.

    Follows :class:`~sklearn.linear_model.RidgeCV`: ``cv=None`` is an exact, cheap
    leave-one-out; then it predicts like :class:`NadarayaWatsonRegressor` with
    ``bandwidth=bandwidth_``. By default it searches fixed and adaptive bandwidths and
    local polynomials of degree 0 to 2, and keeps the simplest candidate within one
    standard error of the best (see Notes).

    Read more in the :ref:`User Guide <ug_automatic>`.
"""
        + _SHARED_DOC.format(
            default_score="the negative sample-weighted mean squared error").replace(
            "\n\n    Attributes\n", "\n" + _DEGREE_DOC + "\n" + _SELECTION_DOC + "\n"
            + _RESIDUAL_DOC + "\n\n    Attributes\n", 1)
        + """    degree_ : int
        The degree of the fit: ``degree``, or the one ``"auto"`` chose.
    y_fit_ : ndarray of shape (n_samples_fit,) or (n_samples_fit, n_outputs)
        Training targets, float64.
"""
        + _FITTED + "\n" + LEAVE_ONE_OUT["loo_prediction_"]
        + """

    See Also
    --------
    NadarayaWatsonRegressor : With a fixed, rule-of-thumb or learned bandwidth.
    sklearn.linear_model.RidgeCV : The same design: an exact leave-one-out by default.
    sklearn.model_selection.GridSearchCV : What a ``cv`` other than None runs.
    sklearn_nw.inspection.BandwidthSearchDisplay : The candidates' scores, the chosen one
        marked.
"""
        + _NOTES_DOC
        + """
    Examples
    --------
    With default arguments every kind of candidate is searched; ``best_params_`` says
    which was chosen.

    >>> import numpy as np
    >>> from sklearn_nw import NadarayaWatsonRegressorCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 6, (200, 1))
    >>> y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = NadarayaWatsonRegressorCV().fit(X, y)
    >>> sorted(reg.best_params_)
    ['bandwidth', 'degree', 'kind']
    >>> reg.best_params_["kind"], reg.best_params_["degree"]
    ('fixed', 2)
    >>> reg.best_params_["bandwidth"].round(2)
    array([0.89])
    >>> bool(abs(reg.predict([[1.5]])[0] - np.sin(1.5)) < 0.1)
    True

    A grid of your own is searched as it is:

    >>> reg = NadarayaWatsonRegressorCV(bandwidths=[0.001, 0.3, 30.0], degree=0)
    >>> reg.fit(X, y).bandwidth_
    array([0.3])
"""
    )

    _plain_class = NadarayaWatsonRegressor
    _default_scoring = "r2"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonRegressor)

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto", cv=None,
                 scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", degree="auto", bounded=True, selection="one_se",
                 leave_out="row", categorical_features="from_dtype",
                 categorical_kernel="li_racine", residual_variance="nn",
                 residual_neighbors=3, store_loo=False):
        self.bandwidths = bandwidths
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
        self.selection = selection
        self.leave_out = leave_out
        self.bandwidth_kinds = bandwidth_kinds
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device
        self.degree = degree
        self.bounded = bounded
        self.residual_variance = residual_variance
        self.residual_neighbors = residual_neighbors
        self.store_loo = store_loo

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, groups=None, **params):
        return _fit_with_grid_search(self, X, y, sample_weight, groups, params)

    fit.__doc__ = _FIT_DOC

    def get_metadata_routing(self):
        return _metadata_routing(self)

    get_metadata_routing.__doc__ = _ROUTING_DOC


class NadarayaWatsonClassifierCV(NadarayaWatsonClassifier):
    __doc__ = (
        """Nadaraya-Watson classification with the bandwidth chosen from a grid by
    cross-validation.

    ``cv=None`` is an exact, cheap leave-one-out; then it predicts like
    :class:`NadarayaWatsonClassifier` with ``bandwidth=bandwidth_``. By default it
    searches fixed and adaptive bandwidths and keeps the one of least leave-one-out
    log-loss (see Notes).

    Read more in the :ref:`User Guide <ug_classification_cv>`.
"""
        + _SHARED_DOC.format(
            default_score="the negative sample-weighted log-loss (over every kind of "
            "bandwidth: the classifier keeps the best candidate, not the simplest kind "
            "within one standard error)").replace(
            "\n\n    Attributes\n", "\n" + _SELECTION_DOC + "\n"
            + entries(PARAMETERS, "store_loo") + "\n\n    Attributes\n", 1)
        + """    classes_ : ndarray of shape (n_classes,)
        The class labels.
    y_fit_ : ndarray of shape (n_samples_fit,)
        Training labels encoded as indices into ``classes_``.
"""
        + _FITTED + "\n" + LEAVE_ONE_OUT["loo_proba_"]
        + """

    See Also
    --------
    NadarayaWatsonClassifier : With a fixed, rule-of-thumb or learned bandwidth.
    sklearn.linear_model.RidgeClassifierCV : The same design: an exact leave-one-out by
        default.
    sklearn.model_selection.GridSearchCV : What a ``cv`` other than None runs.
    sklearn_nw.inspection.BandwidthSearchDisplay : The candidates' scores, the chosen one
        marked.
"""
        + _NOTES_DOC.replace(
            "    Notes\n    -----\n", "    Notes\n    -----\n    The classifier's default "
            "score, the log-loss, has no per-sample values: with\n    ``cv=None`` and "
            "``scoring=None`` it keeps the candidate of least loss over every family,\n"
            "    whatever ``selection``.\n\n", 1)
        + """
    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_nw import NadarayaWatsonClassifierCV
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = NadarayaWatsonClassifierCV().fit(X, y)
    >>> sorted(clf.best_params_)
    ['bandwidth', 'kind', 'n_neighbors', 'scale']
    >>> clf.best_params_["kind"], clf.best_params_["n_neighbors"]
    ('balloon', 2)
    >>> round(clf.best_score_, 3)  # the negative leave-one-out log-loss
    -0.107
    >>> clf.predict(X[[0, 50, 100]])
    array([0, 1, 2])
"""
    )

    _plain_class = NadarayaWatsonClassifier
    _default_scoring = "accuracy"
    _parameter_constraints: ClassVar[dict] = _search_constraints(NadarayaWatsonClassifier)

    def __init__(self, bandwidths=None, kernel="gaussian", *, bandwidth_kinds="auto", cv=None,
                 scoring=None, n_neighbors=None, algorithm="auto", compute="auto",
                 device="cpu", selection="one_se", leave_out="row",
                 categorical_features="from_dtype", categorical_kernel="li_racine",
                 store_loo=False):
        self.bandwidths = bandwidths
        self.categorical_features = categorical_features
        self.categorical_kernel = categorical_kernel
        self.selection = selection
        self.leave_out = leave_out
        self.bandwidth_kinds = bandwidth_kinds
        self.kernel = kernel
        self.cv = cv
        self.scoring = scoring
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.compute = compute
        self.device = device
        self.store_loo = store_loo

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, groups=None, **params):
        return _fit_with_grid_search(self, X, y, sample_weight, groups, params)

    fit.__doc__ = _FIT_DOC

    def get_metadata_routing(self):
        return _metadata_routing(self)

    get_metadata_routing.__doc__ = _ROUTING_DOC
