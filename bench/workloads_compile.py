"""ft.compile workloads (issue 6, item 5): the facade MLP training step and the WGAN-GP
critic step with their loss computations compiled, against the same steps run eagerly and
against hand-written NumPy (the floors of workloads_facade_nn).

Each variant owns its model and optimizer and advances them one step per call, from the
same initial state. Compile time (capture, optimization and lowering of the forward, then
derivation and lowering of the backward at the first backward) is in the notes.
"""
from __future__ import annotations

import time

import functrans as ft
import functrans.nn.functional as F

from .harness import Case, workload
from .workloads_facade_nn import (ADAM, LAM, LR, MOMENTUM, CriticStepFloor, MlpStepFloor,
                                  _critic, _gp_data, _mlp_data, _mlp_model,
                                  critic_step_facade, mlp_step_facade)


def _first_step_seconds(step):
    """Seconds of the first compiled step: capture, lowering, first backward program."""
    t0 = time.perf_counter()
    step()
    return round(time.perf_counter() - t0, 4)


def _state(loss, params):
    return [loss.detach().numpy()] + [p.detach().numpy() for p in params]


@workload("compile_mlp_train_step", issue=6, rtol=2e-4, atol=1e-6,
          description="ft.compile'd facade MLP 784-512-512-10, batch 128 (the loss "
                      "computation compiled; backward, SGD(momentum) step) vs the eager facade "
                      "step and the same step in hand-written NumPy")
def compile_mlp_train_step():
    x, y = _mlp_data()
    tx, ty = ft.tensor(x), ft.tensor(y)
    runs = {}
    for name in ("eager", "compiled", "floor_init"):
        model = _mlp_model()
        params = list(model.parameters())
        runs[name] = (model, params, ft.optim.SGD(params, lr=LR, momentum=MOMENTUM))
    _, p0, _ = runs["floor_init"]
    floor = MlpStepFloor([p.detach().numpy().copy() for p in p0[0::2]],
                         [p.detach().numpy().copy() for p in p0[1::2]])
    em, ep, eopt = runs["eager"]
    cm, cp, copt = runs["compiled"]
    loss_fn = ft.compile(lambda x, y: F.cross_entropy(cm(x), y))

    def compiled():
        copt.zero_grad()
        loss = loss_fn(tx, ty)
        loss.backward()
        copt.step()
        return loss
    # the compile happens on a twin with the same shapes (the checked first call must start
    # from the initial state like the other variants)
    twin = _mlp_model(seed=1)
    twin_fn = ft.compile(lambda x, y: F.cross_entropy(twin(x), y))
    compile_s = _first_step_seconds(lambda: twin_fn(tx, ty).backward())
    return Case({"numpy": lambda: floor(x, y),
                 "facade": lambda: _state(mlp_step_facade(em, eopt, tx, ty), ep),
                 "compiled": lambda: _state(compiled(), cp)},
                notes={"compile_s": compile_s})


@workload("compile_wgan_gp_critic_step", issue=6, rtol=2e-4, atol=1e-6,
          description="ft.compile'd WGAN-GP critic loss (tanh MLP 2-128-128-1, batch 256; the "
                      "gradient penalty's autograd.grad(create_graph=True) traced into the "
                      "program), backward, Adam vs eager and hand-written NumPy")
def compile_wgan_gp_critic_step():
    real, fake, eps = _gp_data()
    tr, tf, te = ft.tensor(real), ft.tensor(fake), ft.tensor(eps)
    floor_critic = _critic()
    fp = list(floor_critic.parameters())
    floor = CriticStepFloor([p.detach().numpy().copy() for p in fp[0::2]],
                            [p.detach().numpy().copy() for p in fp[1::2]])
    eager_critic, comp_critic, twin = _critic(), _critic(), _critic(seed=1)
    ep, cp = list(eager_critic.parameters()), list(comp_critic.parameters())
    eopt, copt = ft.optim.Adam(ep, **ADAM), ft.optim.Adam(cp, **ADAM)

    def make_loss(critic):
        def critic_loss(real, fake, eps):
            x = (eps * real + (1 - eps) * fake).requires_grad_(True)
            d = critic(x)
            (g,) = ft.autograd.grad(d, x, grad_outputs=ft.ones_like(d), create_graph=True)
            gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
            return critic(fake).mean() - critic(real).mean() + LAM * gp
        return ft.compile(critic_loss)
    loss_fn = make_loss(comp_critic)

    def compiled():
        loss = loss_fn(tr, tf, te)
        copt.zero_grad()
        loss.backward()
        copt.step()
        return loss
    twin_fn = make_loss(twin)
    compile_s = _first_step_seconds(lambda: twin_fn(tr, tf, te).backward())
    return Case({"numpy": lambda: floor(real, fake, eps),
                 "facade": lambda: _state(critic_step_facade(eager_critic, eopt, tr, tf, te),
                                          ep),
                 "compiled": lambda: _state(compiled(), cp)},
                notes={"compile_s": compile_s})
