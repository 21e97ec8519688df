"""What runs inside a data center: its rows, its mini-batch random stream, its error-feedback
memory and its step size, and the local computations the algorithms ask of it. A DCWorker only
takes and returns numpy arrays and numbers, so the same object runs in this process
(InProcessPool) or as a separate process (ray_pool.RayPool, one Ray actor per DC).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from scipy.optimize import minimize

from geodml.compression import ErrorFeedback
from geodml.models import LogReg
from geodml.models import get as get_model
from geodml.objective import loss_grad_sum, nnz, objective, pass_flops


ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def local_sgd(X, y: np.ndarray, theta0: np.ndarray, lam: float, lr: float, steps: int, batch_size: int,
              rng: np.random.Generator, mu: float = 0.0, adam: dict | None = None, model=None,
              decay: float = 0.0) -> tuple[np.ndarray, float]:
    """``steps`` mini-batch steps on one DC's local objective
        (1/|B|) sum_{i in B} loss_i + (lam/2)||w||^2 + (mu/2)||theta - theta0||^2
    (mu > 0: FedProx, Li et al. 2020). batch_size 0 or >= n means full-batch gradient descent.
    Batches walk a fresh permutation of the rows each pass. Plain SGD, or with ``adam`` (a dict
    holding m, v, t, updated in place so the state persists across rounds as DiLoCo's inner
    optimizer state does) Adam (Kingma and Ba, ICLR 2015; betas 0.9, 0.999, eps 1e-8, the L2
    term inside the gradient); with decay > 0 AdamW's decoupled weight decay theta -= lr decay theta
    (Loshchilov and Hutter, ICLR 2019). model: a models.py model (default logistic regression).
    Returns (theta (n_params,), flops)."""
    model = model or LogReg()
    n = len(y)
    theta = theta0.copy()
    flops = 0.0
    full = batch_size <= 0 or batch_size >= n
    Xp, yp, pos = X, y, n
    for _ in range(steps):
        if full:
            Xb, yb = X, y
        else:
            if pos + batch_size > n:
                perm = rng.permutation(n)
                Xp, yp, pos = X[perm], y[perm], 0
            Xb, yb = Xp[pos:pos + batch_size], yp[pos:pos + batch_size]
            pos += batch_size
        _, g = model.objective(Xb, yb, theta, lam)
        if mu:
            g += mu * (theta - theta0)
        if adam is None:
            theta -= lr * g
        else:
            b1, b2 = ADAM_BETAS
            if "m" not in adam:
                adam.update(m=np.zeros_like(theta), v=np.zeros_like(theta), t=0)
            adam["t"] += 1
            adam["m"] = b1 * adam["m"] + (1 - b1) * g
            adam["v"] = b2 * adam["v"] + (1 - b2) * g * g
            m_hat = adam["m"] / (1 - b1 ** adam["t"])
            v_hat = adam["v"] / (1 - b2 ** adam["t"])
            theta -= lr * (m_hat / (np.sqrt(v_hat) + ADAM_EPS) + decay * theta)
        flops += model.pass_flops(len(yb), nnz(Xb))
    return theta, flops


def local_lr(X, lam: float, iters: int = 30, seed: int = 0) -> float:
    """The classical 1/L step for a DC's local objective: L = lam + lambda_max(X^T X / n) / 4,
    the largest eigenvalue found by power iteration (iters multiplications by X and X^T; a
    one-time local setup, not accounted in the ledger). For sparse one-hot data L is far below
    the bound mean ||x||^2 / 4, so the step is much larger than that bound allows."""
    n, d = X.shape
    v = np.random.default_rng(seed).normal(size=d)
    lam_max = 0.0
    for _ in range(iters):
        u = np.asarray(X.T @ np.asarray(X @ v).ravel()).ravel() / n
        lam_max = float(np.sqrt(np.sum(u * u)))
        if lam_max == 0.0:
            break
        v = u / lam_max
    return 1.0 / (lam + lam_max / 4.0)


class DCWorker:
    """One data center's side of every algorithm.

    X: (n, d) dense or CSR rows, y: (n,) labels, workers: how many machines share the rows
    (the loss/gradient sums are computed per worker shard and reduced, as inside a real DC),
    index/seed: its own mini-batch random stream (numpy default_rng([seed, index]))."""

    def __init__(self, X, y: np.ndarray, workers: int, index: int, seed: int = 0):
        self.X, self.y = X, y
        self.n, self.nnz = int(len(y)), nnz(X)
        cuts = np.linspace(0, self.n, max(1, min(workers, self.n)) + 1).round().astype(int)
        self.shards = [(X[a:b], y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        self.index = index
        self.reset(seed)

    def reset(self, seed: int) -> None:
        """Forget the state of a previous run: restart the mini-batch stream, drop the
        error-feedback memory, the cached step size and the copy of the global model kept for a
        compressed downlink."""
        self.rng = np.random.default_rng([seed, self.index])
        self.ef: ErrorFeedback | None = None
        self.lr: float | None = None
        self.adam: dict = {}
        self.replica: np.ndarray | None = None

    def get_state(self) -> tuple[dict, dict]:
        """Everything reset() sets and the local computations change, as plain values: (scalars,
        arrays). scalars: "rng" (JSON of the PCG64 bit generator's state, whose 128-bit integers a
        float cannot hold), "lr" (float, absent until computed), "adam_t" (int), "ef_spec" (str,
        absent without error feedback); arrays (float64): "adam_m", "adam_v", "replica",
        "ef_memory" where set. set_state(*get_state()) on a worker holding the same rows continues
        exactly as this one would (the Flower bridge keeps a ClientApp's state this way, since a
        ClientApp is stateless between messages)."""
        import json

        scalars: dict = {"rng": json.dumps(self.rng.bit_generator.state)}
        arrays: dict = {}
        if self.lr is not None:
            scalars["lr"] = float(self.lr)
        if self.adam:
            scalars["adam_t"] = int(self.adam["t"])
            arrays["adam_m"], arrays["adam_v"] = self.adam["m"], self.adam["v"]
        if self.replica is not None:
            arrays["replica"] = self.replica
        if self.ef is not None:
            scalars["ef_spec"] = self.ef.spec
            if "self" in self.ef.memory:
                arrays["ef_memory"] = self.ef.memory["self"]
        return scalars, arrays

    def set_state(self, scalars: dict, arrays: dict) -> None:
        """Restore what get_state returned (see there). Raises KeyError if "rng" is missing."""
        import json

        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = json.loads(scalars["rng"])
        self.lr = float(scalars["lr"]) if "lr" in scalars else None
        self.adam = {"m": arrays["adam_m"], "v": arrays["adam_v"], "t": int(scalars["adam_t"])} if "adam_t" in scalars else {}
        self.replica = arrays.get("replica")
        self.ef = None
        if "ef_spec" in scalars:
            self.ef = ErrorFeedback(scalars["ef_spec"])
            if "ef_memory" in arrays:
                self.ef.memory["self"] = arrays["ef_memory"]

    def loss_grad(self, theta: np.ndarray) -> np.ndarray:
        """Sums over the DC's rows of the loss and its gradient at theta, reduced over the worker
        shards: (d+2,) = [grad_w (d), grad_b, loss]."""
        d = len(theta) - 1
        msg = np.zeros(d + 2)
        for Xs, ys in self.shards:
            loss, gw, gb = loss_grad_sum(Xs, ys, theta[:-1], theta[-1])
            msg[:d] += gw
            msg[d] += gb
            msg[d + 1] += loss
        return msg

    def local_train(self, theta: np.ndarray, lam: float, lr: float, steps: int, batch_size: int, mu: float,
                    compress: str, inner: str = "sgd", model: str = "logreg", decay: float = 0.0) -> tuple[np.ndarray, float, float]:
        """Local training of ``model`` (models.get) from theta with inner 'sgd' (lr 0: this DC's
        1/L for logreg, 0.1 for an MLP), 'adam' or 'adamw' (lr 0: 0.01; moments persist across
        rounds; adamw decays weights by decay). Returns (message, flops, lr used): the message is
        [theta_k, n_k] (float64) or, with compress != 'none', the error-feedback encoded update
        theta_k - theta (uint8)."""
        m = get_model(model)
        if lr <= 0 and inner in ("adam", "adamw"):
            lr = 0.01
        elif lr <= 0 and model != "logreg":
            lr = 0.1
        elif lr <= 0:
            if self.lr is None:
                self.lr = local_lr(self.X, lam)
            lr = self.lr
        th, flops = local_sgd(self.X, self.y, theta, lam, lr, steps, batch_size, self.rng, mu,
                              self.adam if inner in ("adam", "adamw") else None, m, decay if inner == "adamw" else 0.0)
        if compress == "none":
            return np.concatenate([th, [float(self.n)]]), flops, lr
        if self.ef is None or self.ef.spec != compress:
            self.ef = ErrorFeedback(compress)
        return self.ef.send("self", th - theta, float(self.n)), flops, lr

    def local_train_down(self, msg: np.ndarray, down: str, lam: float, lr: float, steps: int, batch_size: int,
                         mu: float, compress: str, inner: str = "sgd", model: str = "logreg",
                         decay: float = 0.0) -> tuple[np.ndarray, float, float]:
        """local_train from this DC's copy of the global model after applying the hub's
        compressed downlink msg (uint8, compression.encode with spec ``down``: the change of the
        hub's copy, starting from zeros). With compress != 'none' the uplink update is relative to
        that copy. Same return as local_train."""
        from geodml.compression import decode

        if self.replica is None:
            self.replica = np.zeros(get_model(model).n_params(self.X.shape[1]))
        self.replica = self.replica + decode(down, msg, len(self.replica))[0]
        return self.local_train(self.replica, lam, lr, steps, batch_size, mu, compress, inner, model, decay)

    def solve_local(self, lam: float, maxiter: int, tol: float) -> tuple[np.ndarray, int]:
        """Minimize the DC's own objective (1/n_k) L_k + (lam/2)||w||^2 with L-BFGS from zero.
        Returns ([theta_k, n_k], passes over the rows)."""
        d1 = self.X.shape[1] + 1
        res = minimize(lambda th: objective(self.X, self.y, th, lam), np.zeros(d1), jac=True, method="L-BFGS-B",
                       options={"maxiter": maxiter, "gtol": tol, "ftol": 1e-15})
        return np.concatenate([res.x, [float(self.n)]]), int(res.nfev)

    def fadl_solve(self, theta: np.ndarray, g: np.ndarray, lam: float, maxiter: int, tol: float,
                   mu: float = 0.0) -> tuple[np.ndarray, int]:
        """FADL's local problem (algorithms.run_fadl) from theta with the global gradient g and
        the proximal strength mu >= 0. Returns ([theta_k, n_k], passes over the rows)."""
        _, gk = objective(self.X, self.y, theta, lam)  # its own gradient at theta (known from the gradient round)
        corr = g - gk

        def f(th):
            v, gr = objective(self.X, self.y, th, lam)
            step = th - theta
            if mu:
                return v + float(np.sum(corr * step)) + 0.5 * mu * float(np.sum(step * step)), gr + corr + mu * step
            return v + float(np.sum(corr * step)), gr + corr
        res = minimize(f, theta.copy(), jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "gtol": tol, "ftol": 1e-15})
        return np.concatenate([res.x, [float(self.n)]]), int(res.nfev)

    def line_losses(self, theta: np.ndarray, direction: np.ndarray, steps: tuple) -> np.ndarray:
        """Loss sums over the DC's rows at theta + a * direction for each a in steps: (len(steps),)."""
        vals = np.empty(len(steps))
        for i, a in enumerate(steps):
            th = theta + a * direction
            z = np.asarray(self.X @ th[:-1]).ravel() + th[-1]
            vals[i] = np.sum(np.logaddexp(0.0, z) - self.y * z)
        return vals


class DCOperations:
    """The operations every algorithm may ask of all data centers at once, typed, over one
    transport method ``call(op, args)`` that a pool supplies (in this process, a Ray actor call,
    a Flower message). Each operation is the DCWorker method of the same name run on every DC;
    each returns {dc name: that method's result}. The names live only here and in DCWorker (a
    test checks that every operation is a DCWorker method with the same parameters)."""

    names: list[str]

    def call(self, op: str, args: dict | tuple = ()) -> dict:  # pragma: no cover - supplied by each pool
        """Run DCWorker.<op> on every DC (args: one tuple for all, or {name: tuple}); {name: result}."""
        raise NotImplementedError

    def reset(self, seed: int) -> dict:
        """DCWorker.reset on every DC: forget a previous run's state."""
        return self.call("reset", (seed,))

    def loss_grad(self, theta: np.ndarray) -> dict:
        """DCWorker.loss_grad on every DC: {name: (d+2,) float64}."""
        return self.call("loss_grad", (theta,))

    def local_train(self, theta: np.ndarray, lam: float, lr: float, steps: int, batch_size: int, mu: float,
                    compress: str, inner: str = "sgd", model: str = "logreg", decay: float = 0.0) -> dict:
        """DCWorker.local_train on every DC: {name: (message, flops, lr)}."""
        return self.call("local_train", (theta, lam, lr, steps, batch_size, mu, compress, inner, model, decay))

    def local_train_down(self, msg: np.ndarray, down: str, lam: float, lr: float, steps: int, batch_size: int,
                         mu: float, compress: str, inner: str = "sgd", model: str = "logreg", decay: float = 0.0) -> dict:
        """DCWorker.local_train_down on every DC: {name: (message, flops, lr)}."""
        return self.call("local_train_down", (msg, down, lam, lr, steps, batch_size, mu, compress, inner, model, decay))

    def solve_local(self, lam: float, maxiter: int, tol: float) -> dict:
        """DCWorker.solve_local on every DC: {name: ([theta_k, n_k], passes)}."""
        return self.call("solve_local", (lam, maxiter, tol))

    def fadl_solve(self, theta: np.ndarray, g: np.ndarray, lam: float, maxiter: int, tol: float, mu: float = 0.0) -> dict:
        """DCWorker.fadl_solve on every DC: {name: ([theta_k, n_k], passes)}."""
        return self.call("fadl_solve", (theta, g, lam, maxiter, tol, mu))

    def line_losses(self, theta: np.ndarray, direction: np.ndarray, steps: tuple) -> dict:
        """DCWorker.line_losses on every DC: {name: (len(steps),) float64}."""
        return self.call("line_losses", (theta, direction, steps))


DC_OPERATIONS = tuple(k for k, v in vars(DCOperations).items() if callable(v) and not k.startswith("_") and k != "call")


@runtime_checkable
class Pool(Protocol):
    """Where the data centers compute: in this process (InProcessPool), one Ray actor per DC
    (ray_pool.RayPool) or one Flower ClientApp per DC (flower_bridge.FlowerPool). Every pool is a
    DCOperations (the typed operations the algorithms call) whose call() is its transport.

    Attributes:
        names: DC names in index order.
        executor: "local", "ray" or "flower".
    """

    names: list[str]
    executor: str

    def call(self, op: str, args: dict | tuple = ()) -> dict:
        """Run DCWorker.<op> on every DC; {name: result}."""

    def close(self) -> None:
        """Release what the pool holds (actors, a Ray instance it started)."""

    def reset(self, seed: int) -> dict:
        """See DCOperations.reset."""

    def loss_grad(self, theta: np.ndarray) -> dict:
        """See DCOperations.loss_grad."""


@runtime_checkable
class MeasuredPool(Pool, Protocol):
    """A pool whose DCs run in other processes, measuring what crosses to them.

    Attributes:
        payload_bytes: nbytes of every numpy array sent to or returned by a DC (bytes).
        serialized_bytes: those messages as the transport writes them (bytes).
        loopback_bytes: growth of the loopback interface's counter while the pool worked (bytes;
            None where it is not measured).
        wall_seconds: wall time spent in call() (seconds).
    """

    payload_bytes: int
    serialized_bytes: int
    wall_seconds: float

    @property
    def loopback_bytes(self) -> int | None:
        """See the class docstring."""


class InProcessPool(DCOperations):
    """Every DC's DCWorker in this process (the embedded default)."""

    executor = "local"

    def __init__(self, dcs, seed: int = 0):
        self.names = [dc.name for dc in dcs]
        self.workers = {dc.name: DCWorker(dc.X, dc.y, dc.workers, i, seed) for i, dc in enumerate(dcs)}

    def call(self, op: str, args: dict | tuple = ()) -> dict:
        """Call DCWorker.<op> on every DC (args: one tuple for all, or {name: tuple}); {name: result}."""
        return {n: getattr(self.workers[n], op)(*(args[n] if isinstance(args, dict) else args)) for n in self.names}

    def close(self) -> None:
        """Nothing to release in process."""
