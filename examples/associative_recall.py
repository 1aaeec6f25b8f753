"""Multi-query associative recall (MQAR) with semisep's layers, Mamba-2 against masked attention.

The task (the SSD paper's section 9.1, after Zoology): a sequence first lists
``n_pairs`` key-value pairs ``k_1 v_1 k_2 v_2 ...``, then asks ``n_queries`` of
the keys again in a random order; at each query the model must output that
key's value. Keys and values are drawn from disjoint halves of the vocabulary
and every sequence has its own pairs, so the only way to answer is to recall
them from the context.

Two 2-layer models with the same embedding, pre-norm residual blocks and output
head, differing only in the sequence mixer:

* ``semisep.nn.Mamba2`` (the SSD layer);
* ``semisep.nn.MaskedAttention`` with an input-dependent 1-SS mask (a decay per
  token and head, the "selective" mask) and a positive feature map: gated
  linear attention built from the same matrix ops.

Run ``python examples/associative_recall.py``. With the defaults (500 steps of
64 sequences, 64 tokens of vocabulary, 8 pairs and 16 queries, ``d_model=64``)
both models reach more than 90% query accuracy on 512 held-out sequences
(chance: 1/32). Measured on the CPU, one thread, seed 0: Mamba2 96.7%,
masked attention 93.1%, 53 s of CPU time for the two together (seeds 1 and 2:
99.9% / 99.2% and 99.4% / 95.0%). A progress bar is drawn when ``tqdm`` is
installed (``pip install 'semisep[bench]'``).
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

import semisep.nn as ssnn

try:
    from tqdm.auto import tqdm
except ImportError:  # the progress bar is optional
    tqdm = None


def mqar_batch(batch: int, n_pairs: int, n_queries: int, vocab: int, generator: torch.Generator):
    """Inputs ``(batch, 2 n_pairs + n_queries)`` and targets (``-100`` where nothing is asked).

    Keys are tokens ``[0, vocab/2)``, values ``[vocab/2, vocab)``; the keys of a
    sequence are distinct, each query is one of them.
    """
    half = vocab // 2
    keys = torch.argsort(torch.rand(batch, half, generator=generator), dim=1)[:, :n_pairs]
    values = half + torch.randint(0, half, (batch, n_pairs), generator=generator)
    pairs = torch.stack([keys, values], dim=2).flatten(1)
    asked = torch.randint(0, n_pairs, (batch, n_queries), generator=generator)
    queries = keys.gather(1, asked)
    inputs = torch.cat([pairs, queries], dim=1)
    targets = torch.full_like(inputs, -100)
    targets[:, 2 * n_pairs:] = values.gather(1, asked)
    return inputs, targets


class RecallModel(nn.Module):
    """Embedding, ``n_layers`` pre-norm residual mixer blocks, RMSNorm, output head."""

    def __init__(self, make_mixer, vocab: int, d_model: int, n_layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.norms = nn.ModuleList(nn.RMSNorm(d_model) for _ in range(n_layers))
        self.mixers = nn.ModuleList(make_mixer() for _ in range(n_layers))
        self.final_norm = nn.RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return self.head(self.final_norm(h))


def models(vocab: int, d_model: int) -> dict:
    """The two models compared, by name."""
    return {
        "Mamba2": RecallModel(
            lambda: ssnn.Mamba2(d_model, d_state=16, headdim=16, chunk_size=16), vocab, d_model),
        "MaskedAttention (selective 1-SS)": RecallModel(
            lambda: ssnn.MaskedAttention(d_model, 4, mask="selective", d_conv=4,
                                         feature_map=lambda t: F.elu(t) + 1), vocab, d_model),
    }


def accuracy(model, inputs, targets) -> float:
    with torch.no_grad():
        predicted = model(inputs).argmax(-1)
    asked = targets != -100
    return float((predicted[asked] == targets[asked]).float().mean())


def train(name, model, *, steps, batch, n_pairs, n_queries, vocab, lr, seed, n_test=512,
          progress=True):
    """Train ``model`` with AdamW on fresh batches; returns the accuracy on ``n_test`` new ones."""
    gen = torch.Generator().manual_seed(seed)
    test = mqar_batch(n_test, n_pairs, n_queries, vocab, torch.Generator().manual_seed(seed + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1),
                                                pct_start=0.1)
    bar = tqdm(range(steps), desc=name, disable=not progress) if tqdm else range(steps)
    for step in bar:
        inputs, targets = mqar_batch(batch, n_pairs, n_queries, vocab, gen)
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if tqdm and progress:
            bar.set_postfix(loss=f"{loss.item():.3f}")
        elif progress and (step % 50 == 0 or step == steps - 1):
            print(f"{name}: step {step + 1}/{steps} loss {loss.item():.3f}", flush=True)
    return accuracy(model, *test)


def main(steps: int = 500, *, batch: int = 64, n_pairs: int = 8, n_queries: int = 16,
         vocab: int = 64, d_model: int = 64, lr: float = 5e-3, seed: int = 0, n_test: int = 512,
         progress: bool = True) -> dict:
    """Train both models for ``steps`` steps; returns ``{name: (accuracy, seconds)}``."""
    torch.manual_seed(seed)
    results = {}
    for name, model in models(vocab, d_model).items():
        start = time.perf_counter()
        acc = train(name, model, steps=steps, batch=batch, n_pairs=n_pairs,
                    n_queries=n_queries, vocab=vocab, lr=lr, seed=seed, n_test=n_test,
                    progress=progress)
        results[name] = (acc, time.perf_counter() - start)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, (acc, seconds) in main(args.steps, seed=args.seed).items():
        print(f"{name:34s} query accuracy {acc:6.1%}  ({seconds:.0f} s)")
