"""torch.amp's names against PyTorch: GradScaler (scaling, unscale_, skipped steps on
inf/NaN gradients, growth and backoff, state_dict), autocast disabled or disabling itself
for CUDA without a GPU; and what functrans refuses (an enabled autocast region, bfloat16
tensors) with its own errors."""
import warnings

import numpy as np
import pytest

import oracle
from oracle import compare, ft, torch


def _scaler_training(L):
    """Five steps of a float32 model under GradScaler('cpu'); step 3's batch overflows the
    scaled gradients (skipped, scale backed off), the others grow the scale every 2."""
    net = L.nn.Linear(3, 2)
    with L.no_grad():
        net.weight.copy_(L.arange(6, dtype=L.float32).reshape(2, 3) / 10)
        net.bias.zero_()
    opt = L.optim.SGD(net.parameters(), lr=0.1)
    scaler = L.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    log = []
    for step in range(5):
        x = L.ones(4, 3) * (1e36 if step == 2 else step + 1)
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grad = net.weight.grad.clone()
        scaler.step(opt)
        scaler.update()
        log.append((loss.detach() if step != 2 else None, grad if step != 2 else None,
                    net.weight.detach().clone(), scaler.get_scale()))
    return log, scaler.state_dict(), scaler.is_enabled()


def _disabled(L):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        scaler = L.amp.GradScaler()                      # "cuda" without a GPU: disabled
        off = L.amp.GradScaler("cpu", enabled=False)
        x = L.ones(2, requires_grad=True)
        y = scaler.scale(x.sum() * 2)
        with L.autocast(device_type="cpu", enabled=False):
            z = (x * 3).sum()
        with L.autocast(device_type="cuda"):            # disables itself, with a warning
            u = (x * 4).sum()
    return (scaler.is_enabled(), off.is_enabled(), y, z, u, scaler.get_scale(),
            off.state_dict(), [str(m.message).split(".")[0] for m in w],
            L.get_autocast_dtype("cpu") is L.bfloat16, L.is_autocast_enabled())


CASES = {
    "amp:grad_scaler_training": lambda: compare(_scaler_training(ft), _scaler_training(torch),
                                                "scaler", grad_fn=False),
    "amp:disabled": lambda: compare(_disabled(ft), _disabled(torch), "disabled",
                                    grad_fn=False),
}
oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_amp(case_id):
    oracle.case(case_id, CASES[case_id])


def test_enabled_autocast_and_bfloat16_are_refused_saying_what_to_do():
    """Where torch would compute in bfloat16, functrans refuses: no wrong dtype silently."""
    with pytest.raises(NotImplementedError, match=r"autocast.*enabled=False"):
        with ft.autocast(device_type="cpu", dtype=ft.bfloat16):
            pass
    with pytest.raises(NotImplementedError, match="no per-op automatic mixed precision"):
        with ft.autocast("cpu", dtype=ft.float16):
            pass
    assert repr(ft.bfloat16) == "torch.bfloat16" and ft.bfloat16 != ft.float32
    for make in (lambda: ft.zeros(2, dtype=ft.bfloat16), lambda: ft.ones(2).to(ft.bfloat16),
                 lambda: ft.ones(2).bfloat16(), lambda: ft.tensor([1.0], dtype=ft.bfloat16)):
        with pytest.raises(TypeError, match="no bfloat16 dtype.*float32"):
            make()
    assert np.isclose(ft.amp.GradScaler("cpu").get_scale(), 65536.0)
