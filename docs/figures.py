"""Make the figures of the concept pages: ``python docs/figures.py`` writes ``docs/img/*.png``.

* ``sss.png``: an SSS matrix (scalar decays, N = 2) next to its entries' definition;
* ``oness.png``: a 1-SS mask with a reset, and the causal mask it becomes with every a = 1;
* ``blocks.png``: the chunked decomposition of an SSS matrix: diagonal blocks
  (computed by the quadratic form) and off-diagonal blocks of rank <= N;
* ``masks.png``: the masks of masked attention: causal, decay, Toeplitz, 1-SS;
* ``duality.png``: a 1-SS mask, the scores ``C B^T`` and their product, an SSS matrix;
* ``segsum.png``: the float32 error of the 1-SS entries ``exp(segsum(log_a))``
  against float64, by semisep's ``segsum`` and by differences of cumulative sums, over T.

Every matrix is built by semisep itself (``to_dense``), so the pictures show
what the library computes. Deterministic (fixed seeds); needs matplotlib.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import semisep as ss  # noqa: E402

IMG = Path(__file__).parent / "img"


def _heatmap(ax, matrix, title, cmap="RdBu_r"):
    finite = np.abs(matrix[np.isfinite(matrix)])
    vmax = finite.max() if finite.size else 1.0
    shown = np.ma.masked_where(np.triu(np.ones_like(matrix, dtype=bool), 1), matrix)
    image = ax.imshow(shown, cmap=cmap, vmin=-vmax if cmap == "RdBu_r" else 0, vmax=vmax)
    ax.set_title(title, fontsize=10)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("i (input step)")
    ax.set_ylabel("j (output step)")
    return image


def sss_figure(path):
    rng = np.random.default_rng(1)
    T, N = 24, 2
    log_a = rng.uniform(-0.4, 0, T)
    M = ss.SSS.from_log(log_a, rng.normal(size=(T, N)), rng.normal(size=(T, N)))
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.9))
    image = _heatmap(axes[0], M.to_dense(), "SSS(A, B, C), T = 24, N = 2")
    fig.colorbar(image, ax=axes[0], shrink=0.8)
    # rank of the off-diagonal blocks M[k:, :k] is at most N
    ranks = [np.linalg.matrix_rank(M.to_dense()[k:, :k]) for k in range(1, T)]
    axes[1].step(range(1, T), ranks, where="mid")
    axes[1].set_ylim(0, N + 1)
    axes[1].set_xlabel("k")
    axes[1].set_ylabel("rank of M[k:, :k]")
    axes[1].set_title(f"blocks below the diagonal: rank <= N = {N}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def oness_figure(path):
    T = 24
    log_a = np.full(T, -0.15)
    log_a[14] = -np.inf                       # a reset: nothing before step 14 reaches past it
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.9))
    image = _heatmap(axes[0], ss.OneSS.from_log(log_a).to_dense(),
                     "OneSS.from_log(log_a), a reset at step 14", cmap="viridis")
    fig.colorbar(image, ax=axes[0], shrink=0.8)
    _heatmap(axes[1], ss.OneSS(np.ones(T)).to_dense(), "OneSS(ones): the causal mask",
             cmap="viridis")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def blocks_figure(path):
    rng = np.random.default_rng(2)
    T, N, Q = 28, 2, 8
    M = ss.SSS.from_log(rng.uniform(-0.3, 0, T), rng.normal(size=(T, N)),
                        rng.normal(size=(T, N)))
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    _heatmap(ax, M.to_dense(), f"M.blocks({Q}): T = {T}, chunks of Q = {Q}")
    starts = list(range(0, T, Q))
    for r in starts:
        for c in starts:
            if c > r:
                continue
            h, w = min(Q, T - r), min(Q, T - c)
            diagonal = r == c
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), w, h, fill=False, lw=2.2 if diagonal else 1,
                                   ec="black" if diagonal else "dimgray",
                                   ls="-" if diagonal else "--"))
            if not diagonal:
                ax.text(c + w / 2 - 0.5, r + h / 2 - 0.5, f"rank\n<= {N}", ha="center",
                        va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def segsum_figure(path):
    rng = np.random.default_rng(3)
    Ts = [64, 256, 1024, 4096]
    stable, naive = [], []
    for T in Ts:
        x = rng.uniform(-1, 0, T).astype(np.float32)
        exact = np.exp(ss.segsum(x.astype(np.float64)))       # the same inputs, in float64
        lower = np.tril(np.ones((T, T), dtype=bool))
        cs = np.cumsum(x)
        by_difference = np.exp(np.where(lower, cs[:, None] - cs[None, :], -np.inf))
        stable.append(np.abs(np.exp(ss.segsum(x)) - exact).max())
        naive.append(np.abs(by_difference - exact).max())
    fig, ax = plt.subplots(figsize=(5.4, 3.8))
    ax.loglog(Ts, naive, "o-", label="exp(cumsum[i] - cumsum[j])")
    ax.loglog(Ts, stable, "o-", label="exp(segsum(log_a))")
    ax.axhline(1e-5, color="gray", ls=":", label="1e-5")
    ax.set_xscale("log", base=2)
    ax.set_xticks(Ts, [str(T) for T in Ts])
    ax.minorticks_off()
    ax.set_xlabel("T")
    ax.set_ylabel("max |error| of an entry (entries <= 1)")
    ax.set_title("1-SS mask entries in float32, against float64", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def masks_figure(path):
    T = 16
    rng = np.random.default_rng(4)
    gallery = {
        "masks.Causal(T)": ss.masks.Causal(T).to_dense(),
        "masks.Decay(0.8, T)": ss.masks.Decay(0.8, T).to_dense(),
        "masks.Toeplitz(alpha)": ss.masks.Toeplitz(np.cos(np.arange(T) / 2) / (1 + np.arange(T))
                                                   ).to_dense(),
        "OneSS.from_log(log_a)": ss.OneSS.from_log(-rng.uniform(0, 0.6, T)).to_dense(),
    }
    fig, axes = plt.subplots(1, 4, figsize=(11, 3.1))
    for ax, (title, dense) in zip(axes, gallery.items()):
        _heatmap(ax, dense, title)
        ax.set_xlabel("s")
        ax.set_ylabel("t")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def duality_figure(path):
    rng = np.random.default_rng(5)
    T, N = 16, 3
    log_a = -rng.uniform(0, 0.4, T)
    B, C = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    panels = {
        "L = OneSS.from_log(log_a)": ss.OneSS.from_log(log_a).to_dense(),
        "C Bᵀ (the scores)": C @ B.T,
        "L ∘ C Bᵀ = SSS.from_log(log_a, B, C)": ss.SSS.from_log(log_a, B, C).to_dense(),
    }
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    for ax, (title, dense) in zip(axes, panels.items()):
        if title.startswith("C B"):
            vmax = np.abs(dense).max()
            ax.imshow(dense, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            ax.set_title(title, fontsize=10)
        else:
            _heatmap(ax, dense, title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


FIGURES = {"sss.png": sss_figure, "oness.png": oness_figure, "blocks.png": blocks_figure,
           "segsum.png": segsum_figure, "masks.png": masks_figure, "duality.png": duality_figure}


def main():
    IMG.mkdir(exist_ok=True)
    for name, make in FIGURES.items():
        make(IMG / name)
        print(f"wrote {IMG / name}")


if __name__ == "__main__":
    main()
