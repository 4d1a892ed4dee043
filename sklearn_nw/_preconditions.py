"""What a computation needs before it starts, each checked in one place with one message:
a torch device this machine has, dense blocks within scikit-learn's ``working_memory``, and
two distinct training inputs to leave one out.

Torch only, no scikit-learn import: the engine, the key set, the bandwidth strategies and
the estimators (local and Dask) all use it.
"""

import torch


def resolve_device(device):
    """The available :class:`torch.device` that ``device`` names.

    Parameters
    ----------
    device : str or torch.device
        ``"cpu"``, ``"cuda"``, ``"cuda:i"``, ``"mps"``, or ``"auto"`` (CUDA, else MPS,
        else the CPU).

    Returns
    -------
    device : torch.device

    Raises
    ------
    ValueError
        If ``device`` is no torch device, or one this machine does not have.
    """
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a valid torch device: {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine "
                "(torch.cuda.is_available() is False). Use device='cpu' or device='auto'."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} was requested but only {torch.cuda.device_count()} "
                "CUDA device(s) are present."
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"device={device!r} was requested but MPS is not available on this machine "
            "(torch.backends.mps.is_available() is False). Use device='cpu' or device='auto'."
        )
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device={device!r} is not supported; use 'cpu', 'cuda', 'mps' or 'auto'.")
    return dev


def check_working_memory(nbytes, working_memory, what, *, details="", instead=""):
    """Refuse a computation that would hold ``nbytes`` at once, above ``working_memory``.

    The message reads "``what``, more than scikit-learn's working_memory of ...
    MiB``details``. Raise the limit with sklearn.config_context(working_memory=...)
    ``instead``."

    Parameters
    ----------
    nbytes : int or float
        The bytes the computation would hold at once.
    working_memory : float
        The budget in MiB: scikit-learn's ``working_memory`` when the computation was
        asked for.
    what : str
        What would be held, e.g. ``"attention_weights_ would be a dense (n, n) matrix"``.
    details : str, default=""
        Appended to the first sentence, e.g. ``": it needs at least 17 MiB"``.
    instead : str, default=""
        Appended to the last sentence: what else would work, e.g. ``", or use cv=5"``.

    Raises
    ------
    ValueError
        If ``nbytes`` is more than ``working_memory`` MiB.
    """
    if nbytes > working_memory * 2**20:
        raise ValueError(
            f"{what}, more than scikit-learn's working_memory of {working_memory:g} "
            f"MiB{details}. Raise the limit with sklearn.config_context(working_memory=...)"
            f"{instead}."
        )


def check_two_inputs(n_inputs, n_samples, what):
    """Refuse leave-one-out over fewer than two distinct training inputs of positive weight.

    Each input is left out with every copy of itself: with one location of weight, nothing
    is left to predict it.

    Parameters
    ----------
    n_inputs : int
        The distinct training inputs of positive sample weight.
    n_samples : int
        The training rows.
    what : str
        What leaves one out, named in the error, e.g. ``"NadarayaWatsonRegressor with
        bandwidth='loo'"``.

    Raises
    ------
    ValueError
        If ``n_inputs`` is less than 2.
    """
    if n_inputs < 2:
        raise ValueError(
            f"{what} needs at least 2 distinct training inputs with positive sample weight "
            f"(each point is left out with every copy of it); got n_samples={n_samples} "
            f"with {n_inputs} such input(s)."
        )
