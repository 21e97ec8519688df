"""The hyper-parameters of a run (one flat set, as the command line gives them; each algorithm's
registry record names the fields it reads) and the constants that both an algorithm and its cost
model need."""

from __future__ import annotations

from dataclasses import dataclass

INNER_OPTIMIZERS = ("sgd", "adam", "adamw")

# FADL's line search evaluates F at theta + a * direction for these a in one round.
FADL_STEPS = tuple(2.0**-i for i in range(8))


@dataclass(frozen=True)
class Settings:
    """Hyper-parameters shared by the algorithms.

    lam: L2 strength of F (objective.py). lbfgs_maxiter / tol: distributed L-BFGS (and the
    centralized scikit-learn fit) stopping rules. rounds: communication rounds of FedAvg, FedProx
    and DiLoCo. local_steps: SGD steps per round on each DC; batch_size: rows per step (0 = full
    local batch); lr: local step size (0: each DC uses 1/L_k, see local_lr). mu: FedProx proximal strength. outer_lr, outer_momentum:
    DiLoCo's outer Nesterov SGD (Douillard et al. 2023 use 0.7 and 0.9). fadl_iters: FADL outer iterations;
    fadl_local_iters: L-BFGS iterations of each local solve; fadl_mu: FADL's starting proximal
    strength, adapted during the run unless fadl_adapt is False (see run_fadl). compress: uplink encoding of
    FedAvg/FedProx/DiLoCo updates with error feedback (compression.py: none, q8, topk:F); with
    none the reply is the local model and n_k as d+2 float64. compress_down: the same encodings for
    the hub's broadcast of FedAvg/FedProx/DiLoCo (_local_round). inner: local optimizer of
    FedAvg/FedProx/DiLoCo, sgd, adam or adamw (dcside.local_sgd; adamw adds decoupled weight decay
    weight_decay, Loshchilov and Hutter, ICLR 2019, as DiLoCo's inner optimizer). model: logreg
    or mlp[:H] (models.py). seed: mini-batch order and the MLP's initial weights.
    """

    lam: float = 1e-4
    lbfgs_maxiter: int = 200
    tol: float = 1e-6
    rounds: int = 20
    local_steps: int = 50
    batch_size: int = 256
    lr: float = 0.0
    mu: float = 0.01
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    fadl_iters: int = 6
    fadl_mu: float = 0.0
    fadl_adapt: bool = True
    compress: str = "none"
    compress_down: str = "none"
    inner: str = "sgd"
    model: str = "logreg"
    weight_decay: float = 0.1
    fadl_local_iters: int = 10
    seed: int = 0
