"""torch.compile(model, backend="smelt"): eager's outputs within rtol 1e-3, atol 1e-4 on
the test modules (an MLP, ResNet-18 at 1x3x224x224, a transformer encoder block with
d_model 384, 6 heads, FFN 1536 at sequence 128, a module whose data-dependent branch breaks
the graph), graph breaks and recompiles reported, dynamic dims kept symbolic, changed
parameters re-specialized, and what smelt cannot take run eagerly with the reason."""

import logging

import pytest

torch = pytest.importorskip("torch")

import smelt.dynamo  # noqa: E402
import torch_models as tm  # noqa: E402

RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(autouse=True)
def fresh():
    smelt.dynamo.reset()
    yield
    smelt.dynamo.reset()


def close(a, b):
    torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)


def on_smelt(report):
    return [g for g in report.graphs if g.backend == "smelt"]


def test_backend_is_registered():
    from torch._dynamo.backends.registry import list_backends, lookup_backend

    assert "smelt" in list_backends()
    assert lookup_backend("smelt") is smelt.dynamo.smelt_backend


def test_mlp():
    m = tm.seeded(tm.MLP())
    c = torch.compile(m, backend="smelt")
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        close(c(x), m(x))
        close(c(x), m(x))
    r = smelt.dynamo.report()
    assert len(r.graphs) == 1 and on_smelt(r)
    g = r.graphs[0]
    assert g.calls == 2 and g.eager_calls == 0 and g.constants == 6
    assert r.graph_break_count == 0 and r.recompile_count == 0


def test_resnet18():
    m = tm.seeded(tm.ResNet18())
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        close(torch.compile(m, backend="smelt")(x), m(x))
    r = smelt.dynamo.report()
    assert len(on_smelt(r)) == 1 and r.graphs[0].ops["conv2d"] == 20


def test_transformer_encoder_block():
    m = tm.seeded(tm.encoder_block(384, 6, 1536))
    x = torch.randn(1, 128, 384, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        close(torch.compile(m, backend="smelt")(x), m(x))
    assert len(on_smelt(smelt.dynamo.report())) == 1


def test_graph_break_is_reported():
    m = tm.seeded(tm.Branchy())
    c = torch.compile(m, backend="smelt")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for sign in (1, -1, 1, -1):
            x = sign * torch.randn(3, 32, generator=g).abs()
            close(c(x), m(x))
    r = smelt.dynamo.report()
    assert r.graph_break_count >= 1
    b = r.graph_breaks[0]
    assert b.location.endswith(f"torch_models.py:{b.location.rsplit(':', 1)[1]}")
    assert "y.sum() > 0" in b.code
    assert "branch" in (b.explanation + b.reason).lower() or "jump" in b.reason
    assert len(on_smelt(r)) == len(r.graphs) >= 3  # before the break, and each branch
    assert "graph break" in str(r)


def test_dynamic_dims_stay_symbolic_and_recompiles_are_counted():
    m = tm.seeded(tm.MLP())
    c = torch.compile(m, backend="smelt")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for batch in (2, 3, 5, 7):
            x = torch.randn(batch, 64, generator=g)
            close(c(x), m(x))
    r = smelt.dynamo.report()
    # Dynamo compiles batch 2 static, then (automatic dynamic) once with a symbolic batch.
    assert len(r.graphs) == 2 and r.recompile_count == 1
    assert "size mismatch" in r.recompiles[0][1][0]
    dyn = r.graphs[1]
    assert dyn.dynamic_dims == [{0: dyn.dynamic_dims[0][0]}] and isinstance(dyn.input_shapes[0][0], str)
    # smelt compiled one plan per batch it saw on the symbolic graph, each with its reason.
    assert [p[0][0][1][0] for p in dyn.plans] == [3, 5, 7]


def test_mark_dynamic():
    m = tm.seeded(tm.MLP())
    x = torch.randn(6, 64)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        close(torch.compile(m, backend="smelt")(x), m(x))
        close(torch.compile(m, backend="smelt")(x[:2]), m(x[:2]))
    assert smelt.dynamo.report().graphs[0].dynamic_dims[0]


def test_changed_parameters_respecialize():
    m = tm.seeded(tm.MLP())
    c = torch.compile(m, backend="smelt")
    x = torch.randn(2, 64)
    with torch.no_grad():
        close(c(x), m(x))
        m.net[0].weight.mul_(0.5)  # in place: the version changes
        close(c(x), m(x))
        m.net[2].bias = torch.nn.Parameter(torch.ones(128))  # a new tensor
        close(c(x), m(x))
        close(c(x), m(x))
    g = smelt.dynamo.report().graphs[-1]
    assert len(g.respecializations) >= 1 and g.eager_calls == 0


def test_autograd_runs_eagerly_with_the_reason(caplog):
    m = tm.seeded(tm.MLP())
    x = torch.randn(2, 64)
    with caplog.at_level(logging.WARNING, logger="smelt.dynamo"):
        y = torch.compile(m, backend="smelt")(x)
    assert y.requires_grad
    close(y, m(x))
    g = smelt.dynamo.report().graphs[0]
    assert g.backend == "eager" and "no_grad" in g.reason
    assert "runs eagerly" in caplog.text


def test_unexportable_graph_runs_eagerly_without_raising(caplog):
    class Fft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs() + 1

    m = Fft()
    x = torch.randn(4, 16)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="smelt.dynamo"):
        close(torch.compile(m, backend="smelt")(x), m(x))
    g = smelt.dynamo.report().graphs[0]
    assert g.backend == "eager" and g.reason and g.eager_calls == 1
    assert "runs eagerly" in caplog.text


def test_options_pick_threads():
    m = tm.seeded(tm.MLP())
    x = torch.randn(2, 64)
    with torch.no_grad():
        close(torch.compile(m, backend="smelt", options={"threads": 1})(x), m(x))


def test_graphs_whose_meaning_export_loses_run_eagerly():
    class InPlace(torch.nn.Module):
        def forward(self, x):
            x.mul_(2)
            return x + 1

    class TrainingBatchNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(8)

        def forward(self, x):
            return self.bn(x)

    with torch.no_grad():
        x = torch.ones(2, 8)
        y = torch.compile(InPlace(), backend="smelt")(x)
        close(y, torch.full((2, 8), 3.0))
        close(x, torch.full((2, 8), 2.0))  # the caller's tensor was changed, as in eager
        bn = TrainingBatchNorm().train()
        torch.compile(bn, backend="smelt")(torch.randn(4, 8))
        assert bn.bn.num_batches_tracked.item() == 1  # the running statistics moved
    graphs = smelt.dynamo.report().graphs
    assert len(graphs) == 2 and all(g.backend == "eager" for g in graphs)
    assert "in place" in graphs[0].reason
    assert "in place" in graphs[1].reason or "training" in graphs[1].reason
