"""Dynamic-graph workloads (issue 17): graphs whose structure changes from call to call, so
that every call (or many) meets a structure never seen before, as in real PyTorch code.

- ``dyn_chain_changing_length``: an f32[8] chain of sin/tanh/mul/add of a new length
  (800-1,820 ops) and op sequence every call, forward + backward: facade and ``ft.grad``
  without jit;
- ``dyn_rnn_varlen_step``: a facade training step of an unrolled tanh RNN cell over
  sequences whose length changes every batch (20-60 steps);
- ``dyn_first_backward``: the first backward of a new 2,500 / 10,000 / 40,000-op chain
  (the forward is recorded untimed: ``Staged``);
- ``jit_compile_time``: ``ft.jit(ft.grad(f))`` first-call (compile) time of chains of
  250 / 2,500 / 10,000 equations, in the notes, with the compiled programs' speed.

Each floor is NumPy written by hand: the derivative of each op by hand, looping in Python
over the ops (the Python-per-op cost PyTorch eager pays too). With ``--against torch`` the
changing-length chain and the first backward also run in PyTorch eager, the same chains in
the same rounds (``torch_eager``, ``torch_<n>``), and each facade variant's median is
given as a ratio to PyTorch's of the same run.
"""
from __future__ import annotations

import itertools
from functools import partial

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from functrans import runtime

from .harness import Case, Staged, library, workload
from .workloads_jit import first_call_seconds

SIN, TANH, MUL, ADD = range(4)
CHAIN_LENGTHS = (800, 1820)              # the changing-length chain: lengths drawn from here
CHAIN_POOL = 512                         # chains per variant before the sequence repeats
FIRST_BACKWARD_SIZES = (2500, 10_000, 40_000)
COMPILE_SIZES = (250, 2500, 10_000)      # equations of the traced loss (chain + sum)

# ---------------------------------------------------------------------------
# f32[8] chains of sin / tanh / mul / add


def chain_inputs(dtype=np.float32, seed=0):
    """x in [-1, 1], the multiplier a (signs, |a| = 1) and the offset b (|b| <= 1e-4).

    sin and tanh contract only slowly near 0, so with these a and b the gradient of even a
    40,000-op chain stays well within float32 (a larger offset settles each element at a
    fixed point whose derivative is below 1, and the gradient underflows to zero)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, 8).astype(dtype)
    a = np.where(rng.uniform(size=8) < 0.5, -1, 1).astype(dtype)
    b = rng.uniform(-1e-4, 1e-4, 8).astype(dtype)
    return x, a, b


def chain_ops(n, seed):
    """n op codes (SIN, TANH, MUL, ADD) drawn uniformly: a new structure for each seed."""
    return np.random.default_rng(seed).integers(0, 4, n).tolist()


def dyn_chain(m, y, ops, a, b):
    """The chain for ``m`` = numpy, functrans.numpy or functrans (facade Tensors)."""
    for k in ops:
        if k == SIN:
            y = m.sin(y)
        elif k == TANH:
            y = m.tanh(y)
        elif k == MUL:
            y = y * a
        else:
            y = y + b
    return y


def chain_forward_floor(x, ops, a, b):
    """The chain in NumPy, keeping what each op's derivative reads: sin's input, tanh's output."""
    saved = []
    y = x
    for k in ops:
        if k == SIN:
            saved.append(y)
            y = np.sin(y)
        elif k == TANH:
            y = np.tanh(y)
            saved.append(y)
        elif k == MUL:
            y = y * a
        else:
            y = y + b
    return y, saved


def chain_backward_floor(ops, saved, a):
    """d sum(chain) / dx by hand: cos(u) for sin, 1 - t^2 for tanh, a for mul, 1 for add."""
    g = np.ones_like(a)
    res = reversed(saved)
    for k in reversed(ops):
        if k == SIN:
            g = g * np.cos(next(res))
        elif k == TANH:
            t = next(res)
            g = g * (1 - t * t)
        elif k == MUL:
            g = g * a
    return g


def chain_grad_floor(x, ops, a, b):
    return chain_backward_floor(ops, chain_forward_floor(x, ops, a, b)[1], a)


def chain_loss(x, ops, a, b):
    """sum(chain(x)) in functrans.numpy: len(ops) + 1 equations."""
    return fnp.sum(dyn_chain(fnp, x, ops, a, b))


def facade_chain(x, ops, a, b):
    """Record the chain on facade Tensors from a new leaf; (leaf, summed output)."""
    tx = ft.tensor(x, requires_grad=True)
    return tx, dyn_chain(ft, tx, ops, a, b).sum()


def facade_backward(state):
    tx, loss = state
    loss.backward()
    return tx.grad.numpy()


def torch_chain(torch, x, ops, a, b):
    """The chain in PyTorch eager from a new leaf; (leaf, summed output)."""
    tx = torch.tensor(x, requires_grad=True)
    return tx, dyn_chain(torch, tx, ops, a, b).sum()


def torch_backward(state):
    tx, loss = state
    loss.backward()
    return tx.grad.numpy()


def changing_chains(pool=CHAIN_POOL, lengths=CHAIN_LENGTHS, seed=0):
    """``pool`` op sequences of distinct lengths in [lo, hi], each with its own ops."""
    rng = np.random.default_rng(seed)
    lo, hi = lengths
    ns = rng.permutation(np.arange(lo, hi + 1))[:pool]
    return [chain_ops(int(n), seed=(seed, i)) for i, n in enumerate(ns)]


def fresh_chains(n):
    """An endless sequence of new n-op chains, the same for every caller."""
    return (chain_ops(n, seed=(n, i)) for i in itertools.count())


@workload("dyn_chain_changing_length", issue=17, rtol=1e-4, atol=1e-7,
          settings={"budget_s": 8.0},
          description="f32[8] chain of sin/tanh/mul/add, a new length (800-1,820 ops) and op "
                      "sequence every call, sum, backward: facade and ft.grad without jit vs "
                      "hand-written NumPy (and PyTorch eager with --against torch)")
def dyn_chain_changing_length():
    """Every call is a structure never seen before (a pool of 512 distinct lengths), so the
    facade runs its backward node by node and ft.grad interprets equation by equation;
    PyTorch eager (with --against torch) records and runs the same chains."""
    x, a, b = chain_inputs()
    ta, tb = ft.tensor(a), ft.tensor(b)
    chains = changing_chains()
    streams = {name: itertools.cycle(chains) for name in ("numpy", "facade", "grad", "torch")}

    def floor():
        return chain_grad_floor(x, next(streams["numpy"]), a, b)

    def facade():
        return facade_backward(facade_chain(x, next(streams["facade"]), ta, tb))

    def grad():
        return ft.grad(partial(chain_loss, ops=next(streams["grad"]), a=a, b=b))(x)
    variants = {"numpy": floor, "facade": facade, "grad": grad}
    torch = library("torch")
    if torch is not None:
        pa, pb = torch.tensor(a), torch.tensor(b)
        variants["torch_eager"] = lambda: torch_backward(
            torch_chain(torch, x, next(streams["torch"]), pa, pb))
    return Case(variants, notes={"mean_ops": round(float(np.mean([len(c) for c in chains])))})


def _first_backward_variants(n, torch=None):
    """(floor, facade, PyTorch eager or None) for n-op chains: each prepares a new chain's
    forward, untimed."""
    x, a, b = chain_inputs()
    ta, tb = ft.tensor(a), ft.tensor(b)
    floor_chains, facade_chains, torch_chains = fresh_chains(n), fresh_chains(n), fresh_chains(n)

    def floor_prepare():
        ops = next(floor_chains)
        return ops, chain_forward_floor(x, ops, a, b)[1]
    pytorch = None
    if torch is not None:
        pa, pb = torch.tensor(a), torch.tensor(b)
        pytorch = Staged(lambda: torch_chain(torch, x, next(torch_chains), pa, pb),
                         torch_backward)
    return (Staged(floor_prepare, lambda state: chain_backward_floor(*state, a)),
            Staged(lambda: facade_chain(x, next(facade_chains), ta, tb), facade_backward),
            pytorch)


@workload("dyn_first_backward", issue=17, floor="numpy_2500", rtol=1e-4, atol=1e-7,
          settings={"warmup": 2, "warmup_s": 0.0, "budget_s": 10.0},
          description="first backward of a new 2,500 / 10,000 / 40,000-op f32[8] chain "
                      "(facade; the forward recorded untimed) vs the hand-written NumPy "
                      "backward (and PyTorch eager's with --against torch)")
def dyn_first_backward():
    """Each timed call runs the backward of a freshly recorded chain with a new op sequence
    (a structure never seen), each floor call the hand-written backward of the same chain,
    each PyTorch call (--against torch) the backward of the same chain recorded by torch."""
    variants, floors, refs = {}, {}, {}
    torch = library("torch")
    for n in FIRST_BACKWARD_SIZES:
        floor, facade, pytorch = _first_backward_variants(n, torch)
        variants[f"numpy_{n}"], variants[f"facade_{n}"] = floor, facade
        floors[f"facade_{n}"] = f"numpy_{n}"
        if pytorch is not None:
            variants[f"torch_{n}"] = pytorch
            floors[f"torch_{n}"] = f"numpy_{n}"
            refs[f"facade_{n}"] = refs[f"torch_{n}"] = {"torch": f"torch_{n}"}
    return Case(variants, floors=floors, refs=refs)


@workload("jit_compile_time", issue=17, floor="numpy_250", rtol=1e-4, atol=1e-7,
          settings={"budget_s": 6.0},
          description="ft.jit(ft.grad(f)) of f32[8] chains of 250 / 2,500 / 10,000 equations: "
                      "first-call (compile) time in the notes; the compiled gradient vs the "
                      "hand-written NumPy forward + backward")
def jit_compile_time():
    """The first call traces, derives, optimizes, lowers and compiles; the notes give its
    seconds and microseconds per equation of f (JAX on this machine, from the issue:
    0.63 / 9.8 / 69 s)."""
    x, a, b = chain_inputs()
    variants, floors, seconds = {}, {}, {}
    for n in COMPILE_SIZES:
        ops = chain_ops(n - 1, seed=(17, n))
        jg = ft.jit(ft.grad(partial(chain_loss, ops=ops, a=a, b=b)))
        seconds[n] = first_call_seconds(jg, x)
        variants[f"numpy_{n}"] = partial(chain_grad_floor, x, ops, a, b)
        variants[f"jit_{n}"] = partial(jg, x)
        floors[f"jit_{n}"] = f"numpy_{n}"
    return Case(variants, floors=floors,
                notes={"compile_s": seconds,
                       "compile_us_per_eqn": {n: round(1e6 * s / n) for n, s in seconds.items()}})


# ---------------------------------------------------------------------------
# an unrolled tanh RNN cell over sequences of changing length: a facade training step

RNN_HIDDEN, RNN_BATCH, RNN_IN = 64, 32, 16
RNN_LENGTHS = (20, 60)
RNN_POOL = 64
RNN_LR = 0.05
RNN_WARM_RUNS = runtime.HOT_RUNS + 1     # steps per length before timing: derived, lowered


def rnn_params(hidden=RNN_HIDDEN, n_in=RNN_IN, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(dtype),
            (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(dtype),
            (0.1 * rng.standard_normal(hidden)).astype(dtype)]


def rnn_batches(pool=RNN_POOL, lengths=RNN_LENGTHS, batch=RNN_BATCH, hidden=RNN_HIDDEN,
                n_in=RNN_IN, dtype=np.float32, seed=0):
    """``pool`` input batches (T, batch, n_in), T in [lo, hi] and never the previous batch's
    T, and one target for the last hidden state."""
    rng = np.random.default_rng(seed)
    lo, hi = lengths
    steps = [int(rng.integers(lo, hi + 1))]
    while len(steps) < pool:
        t = int(rng.integers(lo, hi + 1))
        if t != steps[-1]:
            steps.append(t)
    xs = [rng.standard_normal((t, batch, n_in)).astype(dtype) for t in steps]
    return xs, rng.uniform(-0.5, 0.5, (batch, hidden)).astype(dtype)


def rnn_step_floor(params, xs, y, lr=RNN_LR):
    """mean((h_T - y)^2) of h_t = tanh(x_t Wx + h_{t-1} Wh + b), h_0 = 0; backpropagation
    through time by hand; SGD on ``params`` in place. Returns [loss, Wx, Wh, b]."""
    wx, wh, b = params
    steps, batch, n_in = xs.shape
    hidden = wh.shape[0]
    hs = np.empty((steps, batch, hidden), xs.dtype)
    xw = (xs.reshape(-1, n_in) @ wx).reshape(steps, batch, hidden)
    hs[0] = np.tanh(xw[0] + b)
    for t in range(1, steps):
        z = hs[t - 1] @ wh
        z += xw[t]
        z += b
        np.tanh(z, out=hs[t])
    d = hs[-1] - y
    loss = np.vdot(d, d) / d.size
    dh = (2 / d.size) * d
    dz = np.empty_like(hs)
    for t in range(steps - 1, -1, -1):
        dz[t] = dh * (1 - hs[t] * hs[t])
        if t:
            dh = dz[t] @ wh.T
    dz2 = dz[1:].reshape(-1, hidden)
    gwh = hs[:-1].reshape(-1, hidden).T @ dz2
    dz2 = dz.reshape(-1, hidden)
    gwx = xs.reshape(-1, n_in).T @ dz2
    for p, g in zip(params, (gwx, gwh, dz2.sum(axis=0))):
        p -= lr * g
    return [np.asarray(loss, xs.dtype), wx, wh, b]


def rnn_step_facade(params, optimizer, xs, y):
    """The training step as a PyTorch user writes it: zero_grad, the loop, loss, backward,
    step."""
    wx, wh, b = params
    optimizer.zero_grad()
    h = ft.zeros(xs.shape[1], wh.shape[0], dtype=wh.dtype)
    for t in range(xs.shape[0]):
        h = ft.tanh(xs[t] @ wx + h @ wh + b)
    loss = ((h - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss


@workload("dyn_rnn_varlen_step", issue=17, rtol=2e-4, atol=1e-6,
          description="facade training step of an unrolled tanh RNN cell (hidden 64, batch 32, "
                      "input 16) over sequences of 20-60 steps, a new length every batch: "
                      "loss on the last state, backward, SGD vs NumPy BPTT by hand")
def dyn_rnn_varlen_step():
    """The steady state of a training run: with 41 possible lengths, each length's graph is
    new once (run node by node), its program is derived when it repeats and lowered when
    hot; a twin model has run every length that often before timing starts, so each step
    finds its length's program (the cost of new structures is dyn_first_backward's)."""
    xs, y = rnn_batches(lengths=RNN_LENGTHS)
    init = rnn_params()
    floor_params = [p.copy() for p in init]
    params = [ft.tensor(p, requires_grad=True) for p in init]
    optimizer = ft.optim.SGD(params, lr=RNN_LR)
    txs, ty = [ft.tensor(x) for x in xs], ft.tensor(y)
    twin = [ft.tensor(p, requires_grad=True) for p in init]
    twin_opt = ft.optim.SGD(twin, lr=0.0)
    by_length = {x.shape[0]: x for x in txs}
    for _ in range(RNN_WARM_RUNS):
        for x in by_length.values():
            rnn_step_facade(twin, twin_opt, x, ty)
    floor_batches, facade_batches = itertools.cycle(xs), itertools.cycle(txs)

    def facade():
        loss = rnn_step_facade(params, optimizer, next(facade_batches), ty)
        return [loss.detach().numpy()] + [p.detach().numpy() for p in params]
    return {"numpy": lambda: rnn_step_floor(floor_params, next(floor_batches), y),
            "facade": facade}
