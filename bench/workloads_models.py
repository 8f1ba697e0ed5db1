"""Model workloads (issue 30): one training step of four models (bench/models.py: a small
GPT, PyTorch's word_language_model LSTM, mnist/main.py's Net, a ResNet-style block), in
every library that can run it, from the same initial weights, in the same rounds.

Variants (those of a library missing or not asked for with ``--against`` are left out):

- ``torch_eager``: PyTorch eager, the model built by the same code (``models.build_model``);
  it is the floor, and the reference every ratio is taken to;
- ``torch_compile``: ``torch.compile(model)``, the optimizer step eager (compile time
  capped at ``COMPILE_CAP_S``; the notes give each variant's first step);
- ``jax_jit``: the whole step (loss, gradient, optimizer update) as plain JAX functions
  under ``jax.jit`` (GPT and the mnist Net);
- ``facade``: the same code on functrans' facade;
- ``ft_compile``: ``ft.compile(model)``, the optimizer step eager;
- ``ft_jit``: the whole step as one function, ``ft.func.functional_call`` of the facade
  model under ``ft.value_and_grad`` and the functional AdamW update (bench/models.py),
  under ``ft.jit`` (the GPT only: the ResNet's BatchNorm updates its running statistics in
  place, which a pure function cannot, and under ``ft.jit`` a facade ``Dropout`` draws its
  mask once, when traced, so the LSTM's and the Net's steps would reuse one mask).

Correctness: every variant runs its first two steps from PyTorch's initial weights (copied
by name, as tests/oracle/oracle.py's copy_weights does) and the two losses (the second is
the loss after the first update) must match PyTorch eager's within float32 tolerance; a
model with dropout takes these two steps in eval mode (the masks of different libraries
cannot agree), then trains. Without torch the facade is the floor and the others are
checked against it. The timed call is one step in training mode.
"""
from __future__ import annotations

import contextlib
import signal
import time

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from functrans import runtime
from functrans.backends import cpu_auto
from functrans.backends.cpu import CONFIG as CPU_CONFIG

from . import models as M
from .harness import Case, Checked, library, workload

COMPILE_CAP_S = 300          # torch.compile's first step (inductor builds C++) at most this
# a step runs the facade's backward program once: it is timed after runtime.NATIVE_RUNS
# steps, once native (before, the first ~60 rounds timed its NumPy tier), and after
# cpu_backend="auto" has chosen between its native and NumPy code (its trial calls run
# the slower candidates too; torch is timed in its steady state)
MODEL_SETTINGS = {"warmup": 3, "warmup_s": 0.0, "budget_s": 20.0,
                  "steady_calls": runtime.NATIVE_RUNS + 1
                  + cpu_auto.calls_to_choose(CPU_CONFIG.native_trials_most)}


class CompileTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds, what):
    """Raise CompileTimeout in the main thread when the block runs past ``seconds``."""
    def expire(signum, frame):
        raise CompileTimeout(f"{what} did not finish within {seconds} s (COMPILE_CAP_S)")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def initial_state(name):
    """The model's initial parameters and buffers as {name: NumPy array}: PyTorch's
    initialization (torch.manual_seed(0)) when torch is there, else the facade's."""
    torch = library("torch")
    if torch is not None:
        torch.manual_seed(0)
        return {k: v.detach().numpy().copy() for k, v in M.build_model(torch, name)
                .state_dict().items()}
    ft.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in M.build_model(ft, name)
            .state_dict().items()}


def loaded_model(L, name, state):
    """Model ``name`` of library L holding ``state`` (copied)."""
    model = M.build_model(L, name)
    model.load_state_dict({k: L.tensor(v.copy()) for k, v in state.items()})
    return model


class FirstSteps:
    """The check of a model variant: its first two steps (eval mode for a model with
    dropout), the losses as float32, and the seconds of the first (compilation included)."""

    def __init__(self, name, step, set_training, cap=None):
        self.name, self.step, self.set_training, self.cap = name, step, set_training, cap
        self.first_s = None

    def __call__(self):
        dropout = M.HAS_DROPOUT[self.name]
        if dropout:
            self.set_training(False)
        losses = []
        for k in range(2):
            t0 = time.perf_counter()
            with (time_limit(self.cap, "the first step") if self.cap and k == 0
                  else contextlib.nullcontext()):
                losses.append(float(self.step()))
            if k == 0:
                self.first_s = round(time.perf_counter() - t0, 3)
        if dropout:
            self.set_training(True)
        return np.array(losses, np.float32)


def trainer_variant(L, name, state, batch, compile=None, cap=None):
    """PyTorch-style training (models.Trainer) in library L, the model optionally compiled:
    a Checked variant whose check is its first two steps."""
    model = loaded_model(L, name, state)
    trainer = M.Trainer(L, name, model, compile=compile)
    x, y = (L.tensor(a) for a in batch)
    check = FirstSteps(name, lambda: trainer.step(x, y).detach(), model.train, cap)
    variant = Checked(check, lambda: trainer.step(x, y))
    variant.first_steps = check
    if cap:                      # the train-mode step compiles again (dropout): capped too
        variant.run = capped_first(variant.run, cap)
    return variant


def capped_first(run, cap):
    """``run``, its first call under the compile cap."""
    calls = [0]

    def wrapped():
        if calls[0]:
            return run()
        calls[0] = 1
        with time_limit(cap, "the first training-mode step"):
            return run()
    return wrapped


FT_JIT_MODELS = ("gpt",)        # see the module docstring for the others
JAX_MODELS = ("gpt", "mnist_net")


def ft_jit_variant(name, state, batch):
    """The step as one function under ft.jit: functional_call of the facade model, the
    gradient by ft.value_and_grad, the functional optimizer update; eval and train mode are
    two jitted functions (the mode is read when the function is traced)."""
    model = loaded_model(ft, name, state)
    init, update = M.OPTIMIZERS[name]
    x, y = (ft.tensor(a) for a in batch)

    def make_step(training):
        def loss_fn(params, x, y):
            model.train(training)
            return M.loss_of(ft, name, ft.func.functional_call(model, params, (x,)), y)

        def step(params, opt_state, x, y):
            loss, grads = ft.value_and_grad(loss_fn)(params, x, y)
            params, opt_state = update(fnp, params, grads, opt_state)
            return params, opt_state, loss
        return ft.jit(step)
    steps = {True: make_step(True), False: make_step(False)}
    params = {k: p.detach().clone() for k, p in model.named_parameters()}
    box = {"params": params, "opt": init(fnp, params), "training": True}

    def run():
        box["params"], box["opt"], loss = steps[box["training"]](box["params"], box["opt"],
                                                                 x, y)
        return loss

    def set_training(mode):
        box["training"] = mode
    check = FirstSteps(name, run, set_training)
    variant = Checked(check, run)
    variant.first_steps = check
    return variant


def jax_variant(jax, name, state, batch):
    """The step as plain JAX functions (models.gpt_loss, models.mnist_log_probs) under
    jax.jit, the optimizer update of models.OPTIMIZERS, the dropout key split every step;
    every call waits for its results (JAX dispatches asynchronously)."""
    jnp = jax.numpy
    init, update = M.OPTIMIZERS[name]
    names = [k for k, _ in M.build_model(ft, name).named_parameters()]
    params = {k: jnp.asarray(state[k]) for k in names}
    x = jnp.asarray(batch[0] if batch[0].dtype == np.float32 else batch[0].astype(np.int32))
    y = jnp.asarray(batch[1].astype(np.int32))

    def loss_fn(p, x, y, key, train):
        if name == "gpt":
            return M.gpt_loss(jnp, jax.nn, p, x, y)
        return M.cross_entropy(jnp, M.mnist_log_probs(jax, p, x, key, train), y)

    def step(p, opt_state, key, x, y, train):
        key, sub = jax.random.split(key)
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y, sub, train)
        p, opt_state = update(jnp, p, grads, opt_state)
        return p, opt_state, key, loss
    jstep = jax.jit(step, static_argnames="train")
    box = {"p": params, "opt": init(jnp, params), "key": jax.random.PRNGKey(0), "train": True}

    def run():
        box["p"], box["opt"], box["key"], loss = jax.block_until_ready(
            jstep(box["p"], box["opt"], box["key"], x, y, train=box["train"]))
        return loss

    def set_training(mode):
        box["train"] = mode
    check = FirstSteps(name, run, set_training)
    variant = Checked(check, run)
    variant.first_steps = check
    return variant


def model_case(name):
    """The variants of model ``name`` that the installed libraries allow."""
    state, batch = initial_state(name), M.batch(name)
    torch, jax = library("torch"), library("jax")
    variants = {}
    if torch is not None:
        variants["torch_eager"] = trainer_variant(torch, name, state, batch)
        variants["torch_compile"] = trainer_variant(torch, name, state, batch,
                                                    compile=torch.compile, cap=COMPILE_CAP_S)
    if jax is not None and name in JAX_MODELS:
        variants["jax_jit"] = jax_variant(jax, name, state, batch)
    variants["facade"] = trainer_variant(ft, name, state, batch)
    variants["ft_compile"] = trainer_variant(ft, name, state, batch, compile=ft.compile)
    if name in FT_JIT_MODELS:
        variants["ft_jit"] = ft_jit_variant(name, state, batch)
    notes = {"first_step_s": lambda: {k: v.first_steps.first_s for k, v in variants.items()
                                      if v.first_steps.first_s is not None}}
    if torch is None:
        notes["reference"] = ("PyTorch missing: the variants are checked against the "
                              "facade's losses, and no ratio to PyTorch is given")
    return Case(variants, notes=notes, floor=None if torch is not None else "facade")


def _register(model, name, description):
    """Register workload ``name``: a training step of ``model`` (bench/models.py)."""
    @workload(name, issue=30, floor="torch_eager", rtol=1e-4, atol=1e-5,
              settings=MODEL_SETTINGS, threads=("default", 1), description=description)
    def setup():
        return model_case(model)
    setup.__doc__ = description
    return setup


gpt_train_step = _register(
    "gpt", "gpt_train_step",
    "GPT (nanoGPT-like: 2 blocks, 4 heads, embedding 128, context 64, vocab 256), batch 16, "
    "causal attention, LayerNorm, exact GELU, cross-entropy, AdamW: one training step")
lstm_lm_train_step = _register(
    "lstm_lm", "lstm_lm_train_step",
    "word_language_model LSTM LM: vocab 1,000, embedding 128, 2-layer LSTM 256 (dropout "
    "0.2), 35 steps x batch 20, NLL of log-softmax, clip_grad_norm_(0.25), SGD(lr 20)")
mnist_cnn_train_step = _register(
    "mnist_net", "mnist_cnn_train_step",
    "mnist/main.py Net (2 conv, max-pool, dropout 0.25/0.5, 2 linear, log-softmax), batch "
    "64, NLL, Adadelta(lr 1): one training step")
resnet_block_train_step = _register(
    "resnet_block", "resnet_block_train_step",
    "ResNet-style block: conv 3->32 + BatchNorm2d + ReLU, a basic residual block (conv-BN-"
    "ReLU-conv-BN + identity, ReLU), global average pooling, linear head; batch 32, "
    "3x32x32, cross-entropy, SGD(momentum 0.9): one training step")
