"""The layer examples run (a few steps, small sizes); docs/layers.md runs in test_docs.py."""

import importlib.util
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_associative_recall_trains_a_few_steps():
    recall = load_example("associative_recall")
    inputs, targets = recall.mqar_batch(4, 3, 5, 16, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 11)
    keys, values = inputs[:, 0:6:2], inputs[:, 1:6:2]
    for row in range(4):   # every query's target is the value paired with its key
        for t in range(6, 11):
            (where,) = (keys[row] == inputs[row, t]).nonzero()[0]
            assert targets[row, t] == values[row, where]
    assert (targets[:, :6] == -100).all()
    results = recall.main(3, batch=8, n_test=16, progress=False)
    assert set(results) == {"Mamba2", "MaskedAttention (selective 1-SS)"}
    for accuracy, seconds in results.values():
        assert 0.0 <= accuracy <= 1.0 and seconds > 0


def test_retention_forms_agree():
    for name, err in load_example("retention").main(T=20).items():
        assert err < 1e-5, name


def test_forget_gate_attention_agrees():
    for name, err in load_example("forget_gate_attention").main(T=20).items():
        assert err < 1e-5, name
