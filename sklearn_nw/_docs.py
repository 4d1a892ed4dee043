"""Docstring entries shared by the estimators (numpydoc), written once: the plain and the
CV estimators, regressor and classifier, document their common parameters and fitted
attributes from here."""

PARAMETERS = {
    "kernel": """\
    kernel : str, Kernel or callable, default="gaussian"
        A name from :data:`sklearn_nw.kernels.KERNELS` (``"gaussian"``, ``"epanechnikov"``,
        ``"tophat"``, ``"linear"``, ``"tricube"``, ``"triweight"``, ``"biweight"``,
        ``"cosine"``, ``"exponential"``, ``"constant"`` and aliases), a
        :class:`~sklearn_nw.kernels.Kernel`, or a function mapping a torch tensor of scaled
        distances ``u >= 0`` to non-negative weights.""",
    "bandwidth": """\
    bandwidth : float, array-like of shape (n_features,), {"scott", "silverman", "loo"}, LeaveOneOutBandwidth or AdaptiveBandwidth, default="scott"
        The bandwidth h, one per feature (a scalar is used for every feature); a rule of
        thumb computed from the weighted training data
        (:func:`~sklearn_nw.bandwidth.scott_bandwidth`,
        :func:`~sklearn_nw.bandwidth.silverman_bandwidth`); learned on the
        leave-one-out loss (``"loo"``, or a :class:`~sklearn_nw.LeaveOneOutBandwidth` with
        its options); or adaptive, following the density of the training points
        (:class:`~sklearn_nw.AdaptiveBandwidth`: each query's, or each training point's,
        c times its distance to its k nearest neighbors).""",  # noqa: E501 (a numpydoc type line is one line)
    "n_neighbors": """\
    n_neighbors : int, default=None
        Restrict each query's attention to its ``n_neighbors`` nearest training points (in
        the scaled metric, found with scikit-learn's neighbor search); None attends to all
        of them. For the Gaussian, the error against full attention is the attention mass
        beyond the k-th neighbor, renormalized away.""",
    "algorithm": """\
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "cell_list"}, default="auto"
        How neighbors are found, as in :class:`~sklearn.neighbors.KNeighborsRegressor`.
        For a compact kernel and ``n_neighbors=None``, only the training points inside the
        support are visited: a tree's radius search, or ``"cell_list"``: the points binned
        into cubes a fraction of the support wide (on the three widest coordinates), each
        block of queries computed densely against the cubes around it. ``"auto"`` uses the
        cell list up to 3 dimensions and a k-d tree up to 15 (when the support holds at
        most 1 in 500 of the training points, estimated at fit), from 5,000 training
        points, and the dense sums over every training point otherwise (and always with
        ``compute="compiled"``). ``"brute"`` always uses the dense sums.""",
    "compute": """\
    compute : {"auto", "eager", "compiled"}, default="auto"
        How the dense sums are computed. ``"eager"``: torch operations on blocks of
        queries. ``"compiled"``: one loop that :func:`torch.compile` fuses (distance,
        kernel weight and weighted sums of each query-key pair, no block of weights in
        memory), compiled once per process for each kernel, dtype, device and number of
        features or outputs (seconds), then usually faster than the eager engine; it raises where
        compiling fails, and refuses ``n_neighbors``, a tree or cell-list ``algorithm`` and
        ``metric="precomputed"``, which restrict attention. ``"auto"``: a configuration of
        a compilable kernel (``Kernel.compilable``: the named kernels) with up to 16
        features is compiled once the eager engine has spent about a compile's time on it
        (5 s, this call's estimated time included), and used for calls of at least 256
        queries after that, unless its calls prove slower per query-key pair than the eager
        engine's (the Gaussian can be, on some CPUs); if compiling fails (no C++ compiler)
        it warns and stays eager.
        Attention maps and leave-one-out sums are always eager.""",
    "metric": """\
    metric : {"euclidean", "precomputed"}, default="euclidean"
        ``"precomputed"``: ``X`` holds distances instead of features, as in
        :class:`~sklearn.neighbors.KNeighborsRegressor`: an (n_samples, n_samples) matrix in
        ``fit`` and (n_queries, n_samples_fit) in ``predict``, dense, or a sparse neighbor
        graph whose stored entries (explicit zeros included) are each row's candidates,
        e.g. from :class:`~sklearn.neighbors.KNeighborsTransformer` or an approximate
        search in a pipeline. ``bandwidth`` must then be a number in the distances' units;
        ``n_neighbors`` picks the nearest stored entries (each row must store that many
        units of sample weight); attention is returned sparse.""",
    "degree": """\
    degree : {0, 1, 2}, default=0
        Degree of the local polynomial fitted around each query (regressor only). 0 is
        Nadaraya-Watson: the attention-weighted average. 1 (local-linear, statsmodels'
        ``KernelReg(reg_type="ll")``) and 2 (local-quadratic) fit a polynomial in
        ``x - q`` to the targets by least squares weighted by the attention and predict
        its value at ``q``: no bias at the boundaries of the data or on linear trends
        (and, for 2, curvature). The prediction is then a weighted sum of the targets whose
        weights (the *equivalent kernel*, returned as the attention) sum to 1 but may be
        negative. A query whose local fit has no unique value at it (fewer training
        points with weight than the polynomial has terms, points on a line the query is
        off, or a query too far for the float type) keeps its
        Nadaraya-Watson value, with a :class:`~sklearn_nw.LocalFitWarning`. A learned
        bandwidth (``"loo"``) minimizes the leave-one-out loss of these local fits, as
        statsmodels' ``KernelReg(reg_type="ll", bw="cv_ls")`` does, full batch (up to
        4,096 leave-one-out keys: distinct rows, or distinct inputs under
        ``leave_out="input"``). Not with ``metric="precomputed"`` (no
        coordinates) or ``compute="compiled"``.""",
    "bounded": """\
    bounded : bool, default=False
        With ``degree`` 1 or 2 (regressor only): keep each local fit within the range of
        the targets that carry its weight (those of the training points whose attention is
        at least 1/1000 of the query's largest), by shrinking its correction of the
        Nadaraya-Watson value just enough; one shrinkage per query, so the prediction is
        still the equivalent kernel (returned as the attention) times the targets. A local
        polynomial otherwise extrapolates beyond the data, or at its edge under a wide
        bandwidth (a local-linear fit of a concave trend), far past any target there.
        False fits as statsmodels' ``KernelReg``.""",
    "residual_variance": """\
    residual_variance : {"nn", "hc0", "hc1", "hc2", "hc3"}, default="nn"
        How ``predict(X, return_std=True)`` estimates each training target's variance
        :math:`\\hat\\sigma_i^2` (regressor only), as nprobust's ``vce``: ``"nn"`` from
        the targets of its ``residual_neighbors`` nearest other training points (in the
        kernel's metric), ``J / (J + 1) (y_i - their mean)^2``; the others from the
        residual :math:`\\hat\\varepsilon_i = y_i - \\hat f(x_i)` of the in-sample fit
        and the point's weight :math:`L_{ii}` in it: ``"hc0"`` :math:`\\hat\\varepsilon_i^2`,
        ``"hc1"`` :math:`n/(n - p)\\,\\hat\\varepsilon_i^2` (p the parameters of a local
        fit: 1, then one per coordinate, and their products for ``degree=2``), ``"hc2"``
        :math:`\\hat\\varepsilon_i^2/(1 - L_{ii})`, ``"hc3"``
        :math:`\\hat\\varepsilon_i^2/(1 - L_{ii})^2`. See :ref:`the user guide
        <uncertainty>`.""",
    "residual_neighbors": """\
    residual_neighbors : int, default=3
        The nearest neighbors of ``residual_variance="nn"`` (nprobust's ``nnmatch``):
        every other training point at least as near as the ``residual_neighbors``-th is
        one (regressor only).""",
    "categorical_features": """\
    categorical_features : {"from_dtype"}, array-like of int, bool or str, or None, default="from_dtype"
        The categorical features, spelled as in
        :class:`~sklearn.ensemble.HistGradientBoostingRegressor`: ``"from_dtype"`` takes a
        pandas DataFrame's ``category`` columns (an *ordered* categorical gets the ordered
        kernel); a boolean mask, integer indices or feature names (of a DataFrame) name
        them (unordered, unless an ordered categorical); None treats every feature as a
        number. Their kernel is ``categorical_kernel``'s, a product with the Gaussian
        ``kernel`` on the continuous features (the only kernel supported with them), and
        their entry of a bandwidth vector is its smoothing ``lambda``, as statsmodels'
        ``bw``. A category not seen at fit is different from every training point;
        missing values are refused. See :ref:`the user guide <categorical>`.""",  # noqa: E501 (a numpydoc type line is one line)
    "categorical_kernel": """\
    categorical_kernel : {"li_racine", "aitchison_aitken"}, default="li_racine"
        The kernels of the categorical features. ``"li_racine"``: 1 for the same category
        and ``lambda`` for another (unordered), ``lambda ** |r - r'|`` between ranks
        (ordered), ``lambda`` in [0, 1] (1 ignores the feature). ``"aitchison_aitken"``:
        statsmodels' ``"u"`` (Aitchison-Aitken: ``1 - lambda`` and ``lambda / (c - 1)``)
        and ``"o"`` (Wang-van Ryzin: ``1 - lambda`` and ``(1 - lambda) / 2 *
        lambda ** |r - r'|``).""",
    "store_loo": """\
    store_loo : bool, default=False
        Compute at fit, and keep, what the uncertainty methods take from the training
        points at the fitted bandwidth: each training row's leave-one-out prediction
        (``loo_prediction_``; the classifier's ``loo_proba_``) and, for the regressor,
        each row's in-sample fit and weight in it and its ``residual_neighbors``
        nearest others (the ``"nn"`` variance's). Without it, ``predict(X,
        return_std=True)``, ``predict_interval``, ``marginal_effects(return_std=True)``
        and ``predict_set`` compute them at every call: a pass of the training points
        over each other (a search of the nearest others for ``"nn"``), which dominates
        those calls when there are fewer queries than training points. With it, ``fit``
        costs that pass (two under an adaptive bandwidth) more. See :ref:`the user
        guide <uncertainty_cost>`.""",
    "device": """\
    device : str, default="cpu"
        Torch device to compute on: ``"cpu"``, ``"cuda"`` (or ``"cuda:i"``), ``"mps"``, or
        ``"auto"`` for the first available of CUDA, MPS and the CPU. Fitted attributes are
        numpy arrays whatever the device.""",
}


ATTRIBUTES = {
    "bandwidth_": """\
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth used (for a learned metric, the effective per-feature bandwidths
        ``1 / ||projection_[j]||``; for an adaptive bandwidth, the per-feature bandwidths
        of its ``base``, the metric its distances are measured in).""",
    "bandwidth_kind_": """\
    bandwidth_kind_ : {"fixed", "balloon", "sample_point"}
        ``"fixed"``: one bandwidth for every query and training point; else the kind of
        :class:`~sklearn_nw.AdaptiveBandwidth`.""",
    "bandwidth_neighbors_": """\
    bandwidth_neighbors_ : int or None
        The k of an adaptive bandwidth (None for a fixed one): ``n_neighbors``, capped
        at what the training set holds.""",
    "bandwidth_scale_": """\
    bandwidth_scale_ : float or None
        The c of an adaptive bandwidth (None for a fixed one).""",
    "key_bandwidths_": """\
    key_bandwidths_ : ndarray of shape (n_samples_fit,)
        A sample-point bandwidth's ``c d_k(x_i)`` of each training point, in units of
        ``bandwidth_`` (training point i's bandwidths are ``key_bandwidths_[i] *
        bandwidth_``). Only with ``AdaptiveBandwidth(kind="sample_point")``.""",
    "projection_": """\
    projection_ : ndarray of shape (n_features, n_components)
        The learned linear metric of ``LeaveOneOutBandwidth(form="full")``: distances are
        ``||(q - x) @ projection_||``. Only with that bandwidth.""",
    "n_iter_": """\
    n_iter_ : int
        Iterations of the leave-one-out bandwidth search. Only with a learned bandwidth.""",
    "loss_curve_": """\
    loss_curve_ : ndarray of shape (n_evaluations,)
        Leave-one-out loss of the training rows at each evaluation of the search, in the
        targets' unit (mean squared error, or log-loss for the classifier). Only with a
        learned bandwidth.""",
    "kernel_": """\
    kernel_ : Kernel
        The resolved kernel.""",
    "device_": """\
    device_ : str
        The resolved device.""",
    "X_fit_": """\
    X_fit_ : ndarray of shape (n_samples_fit, n_features)
        Training inputs (the keys), float64 or float32 as given; categorical features
        hold the index of their category.""",
    "is_categorical_": """\
    is_categorical_ : ndarray of shape (n_features,) of bool, or None
        The categorical features (``categorical_features``); None when there are none.""",
    "route_": """\
    route_ : {"dense", "cell_list", "radius", "k_nearest", "adaptive", "precomputed"}
        The route that ``predict`` takes, resolved once at fit from ``kernel``,
        ``bandwidth``, ``n_neighbors``, ``algorithm``, ``compute`` and ``metric``: sums
        over every training point (``"dense"``); a compact kernel's support, searched on a
        cell list or by a tree (``"radius"``); the ``n_neighbors`` nearest points; an
        adaptive bandwidth (each query's k-th neighbor found by a tree or a brute force
        search, then sums over every training point); or the stored precomputed
        distances.""",
    "key_set_": """\
    key_set_ : FittedKeys
        The training points as attention sees them, built at fit: weights, the pooled
        values, the metric and the search index of ``route_`` (``key_set_.index``: a cell
        list, scikit-learn's k-d or ball tree or brute-force search, or None),
        numpy arrays at rest.""",
    "sample_weight_": """\
    sample_weight_ : ndarray of shape (n_samples_fit,)
        Frequency weights of the training points (ones when none were given).""",
    "attention_weights_": """\
    attention_weights_ : ndarray or scipy.sparse.csr_array of shape (n_samples_fit, n_samples_fit)
        Leave-one-out attention of the training set on itself, computed when read.""",
    "n_features_in_": """\
    n_features_in_ : int
        Number of features seen during fit.""",
    "feature_names_in_": """\
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string feature names.""",
}


def entries(table, *names):
    """The numpydoc entries ``names`` of ``table`` (all of them by default), one after
    the other."""
    return "\n".join(table[name] for name in names or table)


def fill_doc(**blocks):
    """Class decorator: replace each ``%(key)s`` line of the docstring by ``blocks[key]``."""

    def decorate(cls):
        doc = cls.__doc__
        for key, text in blocks.items():
            doc = doc.replace(f"%({key})s", text)
        cls.__doc__ = doc
        return cls

    return decorate


# The leave-one-out state ``store_loo`` keeps: the regressor's and the classifier's.
LEAVE_ONE_OUT = {
    "loo_prediction_": """\
    loo_prediction_ : ndarray of shape (n_samples_fit,) or (n_samples_fit, n_outputs)
        Only with ``store_loo=True``: each training row's prediction by the fit without
        it, at the fitted bandwidth (as :meth:`predict_interval` computes it), where it
        is computed from the fit with every row: not with local polynomials under a
        sample-point bandwidth or on the ``n_neighbors`` nearest keys, nor with
        ``n_neighbors`` and precomputed distances, nor fewer than 2 rows of positive
        weight.""",
    "loo_proba_": """\
    loo_proba_ : ndarray of shape (n_samples_fit, n_classes)
        Only with ``store_loo=True``: each training row's class probabilities by the fit
        without it, at the fitted bandwidth (as :meth:`predict_set` computes them), where
        they are computed from the fit with every row: not with ``n_neighbors`` and
        precomputed distances, nor with fewer than 2 rows of positive weight.""",
}
