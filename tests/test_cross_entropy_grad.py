"""The cross-entropy artifact's ce_grad op on the CPU (torch, no Triton): its fp64 reference against autograd in
fp64, its tolerance against eager's bf16 gradient and against wrong gradients, the bytes it declares, the
entries each variant runs at and the params it refuses before any kernel."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT / "artifacts" / "cross_entropy_bf16_sm90a"
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own contract check and comparison)


@pytest.fixture(scope="module")
def module() -> ModuleType:
    return kwiki_harness.load_module(str(ARTIFACT / "cross_entropy.py"))


def _params(rows: int, cols: int, every: int = 0) -> dict:
    return {"op": "ce_grad", "rows": rows, "cols": cols, **({"ignore_every": every} if every else {}),
            "dtype": "bfloat16_grad"}


def test_contract_and_where_each_variant_runs(module: ModuleType) -> None:
    assert kwiki_harness.contract_problems(module) == []
    grad_entries = [p for p in module.GRID if p["op"] == "ce_grad"]
    assert {(p["rows"], p["cols"]) for p in grad_entries} == {(4096, 128256), (4096, 32000), (1001, 5003), (333, 32008)}
    assert any(p.get("ignore_every") for p in grad_entries)  # an entry with ignored targets, off every tile
    for name in module.VARIANTS:
        entries = [p for p in module.GRID if module.applies(name, p)]
        assert entries, name
        ops = {p["op"] for p in entries}
        if name in module.GRADIENT + module.CUDA_GRAD:
            assert ops == {"ce_grad"}, name
        elif name in module.FORWARD:
            assert ops == {"ce"}, name
        elif name in module.BASELINES:
            assert ops == {"ce", "ce_grad"}, name
    compiled = [p for p in module.GRID if module.applies("torch_compile", p)]
    assert [(p["op"], p["rows"], p["cols"]) for p in compiled] == [("ce", 4096, 128256), ("ce_grad", 4096, 128256)]
    assert all(p["dtype"] in module.TOLERANCES for p in module.GRID)


def test_reference_is_autograd_in_fp64(module: ModuleType) -> None:
    """Loss per row and the gradient of their sum, ignored rows zero, as fp64 autograd of F.cross_entropy gives
    them; the reference's blocks of rows change nothing."""
    params = _params(9, 301, 4)
    inputs = module.make_inputs(params, 3, "cpu")
    x, t = inputs["x"], inputs["t"]
    assert (t == module.IGNORE_INDEX).nonzero().flatten().tolist() == [3, 7]
    ref = module.reference(params, inputs)
    xd = x.double().requires_grad_()
    loss = torch.nn.functional.cross_entropy(xd, t, reduction="none", ignore_index=module.IGNORE_INDEX)
    (grad,) = torch.autograd.grad(loss.sum(), xd)
    assert torch.allclose(ref["loss"], loss.detach(), rtol=1e-12, atol=1e-12)
    assert torch.allclose(ref["grad"], grad, rtol=1e-12, atol=1e-15)
    assert (ref["grad"][[3, 7]] == 0).all() and (ref["loss"][[3, 7]] == 0).all()
    blocks = module.grad_reference(x, t, rows_at_once=2)
    assert all(torch.equal(blocks[k], ref[k]) for k in ref)


def test_eager_passes_the_tolerance_and_wrong_gradients_do_not(module: ModuleType) -> None:
    """The ce_grad tolerance holds eager's bf16 gradient (the loosest baseline) and refuses a gradient 20% off,
    one without the target's -1, and zeros."""
    params = _params(64, 32000, 5)
    inputs = module.make_inputs(params, 5, "cpu")
    outputs = module.make_outputs(params, inputs)
    got = module.load("torch_eager")(dict(inputs), dict(outputs))
    assert set(got) == {"loss", "grad"} and got["grad"].dtype == torch.bfloat16
    assert all(kwiki_harness.plain_problem(got[k], outputs[k], inputs) is None for k in got)
    ref = module.reference(params, inputs)
    atol, rtol, _ = module.TOLERANCES[params["dtype"]]
    for name in ("loss", "grad"):
        ok, detail, _, _ = kwiki_harness.compare(got[name], ref[name], atol, rtol, name)
        assert ok, detail
    keep = inputs["t"] != module.IGNORE_INDEX
    no_onehot = got["grad"].clone()
    no_onehot[torch.arange(64)[keep], inputs["t"][keep]] += 1.0
    for wrong in (got["grad"] * 1.2, no_onehot, torch.zeros_like(got["grad"])):
        assert not kwiki_harness.compare(wrong, ref["grad"], atol, rtol, "grad")[0]


def test_work_counts_one_read_of_the_kept_rows_and_one_write(module: ModuleType) -> None:
    assert module.ignored_rows(_params(1001, 5003, 7)) == 143
    assert module.work(_params(1001, 5003, 7))["bytes"] == 2 * (1001 - 143) * 5003 + 2 * 1001 * 5003 + 12 * 1001
    assert module.work(_params(4096, 128256))["bytes"] == 4 * 4096 * 128256 + 12 * 4096


@pytest.mark.parametrize("every", [1, -2, 2.5])
def test_refuses_bad_ignore_every(module: ModuleType, every: object) -> None:
    with pytest.raises(ValueError, match="ignore_every"):
        module.make_inputs({**_params(4, 100), "ignore_every": every}, 0, "cpu")


def test_ignored_targets_every_nth_row(module: ModuleType) -> None:
    t = module.make_inputs(_params(1001, 5003, 7), 0, "cpu")["t"]
    ignored = (t == module.IGNORE_INDEX).nonzero().flatten()
    assert ignored.tolist() == list(range(6, 1001, 7))
    kept = t[t != module.IGNORE_INDEX]
    assert int(kept.min()) >= 0 and int(kept.max()) < 5003


def test_the_l2_sized_grid(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """triton_grad_l2's grid on an H200's SM count and L2 (read from the device): one 16-warp program an SM at
    128256 columns, three 8-warp ones at 32000, never more programs than rows; a larger L2 allows more."""
    from types import SimpleNamespace

    props = SimpleNamespace(multi_processor_count=132, L2_cache_size=50 << 20)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    monkeypatch.setattr(module, "_DEVICE", {})
    cuda = torch.device("cuda", 0)
    assert module.grad_launch(4096, 128256, cuda) == (132, 16, 16384)
    assert module.grad_launch(4096, 32000, cuda) == (396, 8, 8192)
    assert module.grad_launch(100, 5003, cuda) == (100, 8, 8192)
    monkeypatch.setattr(module, "_DEVICE", {})
    props.L2_cache_size = 200 << 20
    assert module.grad_launch(4096, 128256, cuda) == (396, 8, 8192)
