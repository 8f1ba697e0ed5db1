"""PyTorch's four classic example programs, as small programs of our own written in their
style, run under torch and under functrans and compared step by step (oracle extra).

Each program is one function of the library (`L` is torch or functrans) that trains and
evaluates as the example does: mnist (two convolutions, dropout, max-pool, log-softmax and
NLL, Adadelta with StepLR, a test loop counting correct answers), vae (reparameterization,
BCE + KLD summed, Adam), dcgan (a ConvTranspose2d generator with BatchNorm, a LeakyReLU
discriminator, BCELoss, two Adams with betas (0.5, 0.999), the three backward passes of a
step with `fake.detach()` and `label.fill_`) and word_language_model (LSTM, GRU or a
causal Transformer encoder, NLLLoss, `clip_grad_norm_`, the hand-written SGD update
`p.data.add_(p.grad, alpha=-lr)`, hidden states detached between batches).

Both runs start from torch's initial weights, moved as the programs would move them:
`torch.save(model.state_dict())` read by `ft.load`. Randomness is shared: dropout masks,
`randn`/`randn_like` noise are drawn, in call order, from one NumPy generator per run (the
same seed), patched into torch's `F.dropout`/`randn`/`randn_like` and into functrans's
dropout mask and `randn`/`randn_like`. Everything runs in float64, so the per-step losses,
the evaluation numbers and the final parameters agree to rounding (rtol 1e-9): a
difference in any step is a difference of semantics, not of float32 noise.
"""
from __future__ import annotations

import contextlib
import io
import math
import warnings
from unittest import mock

import numpy as np
import pytest

import oracle
from oracle import compare, ft, torch
import functrans.nn.functional._activations as ft_activations

CASES = {}
RTOL, ATOL = 1e-9, 1e-12


@contextlib.contextmanager
def shared_randomness(L, seed=7):
    """Dropout masks and randn/randn_like noise drawn from np.random.default_rng(seed)."""
    rng = np.random.default_rng(seed)

    def mask(shape, p, dtype=np.float64):
        keep = rng.random(tuple(shape)) >= p
        return (keep / (1.0 - p)).astype(dtype)

    def randn(*size, dtype=None, **kw):
        size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        return L.tensor(rng.standard_normal(size), dtype=dtype or L.get_default_dtype())

    def randn_like(x, **kw):
        return randn(tuple(x.shape), dtype=x.dtype)

    if L is torch:
        def dropout(input, p=0.5, training=True, inplace=False):
            if not training or p == 0.0:
                return input
            m = torch.from_numpy(mask(input.shape, p))
            return input.mul_(m) if inplace else input * m
        patches = [mock.patch.object(torch.nn.functional, "dropout", dropout)]
    else:
        patches = [mock.patch.object(ft_activations, "_dropout_mask", mask)]
    patches += [mock.patch.object(L, "randn", randn), mock.patch.object(L, "randn_like",
                                                                         randn_like)]
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield


def run_both(program, build):
    """program(L, models) -> a record (losses per step, evaluation numbers, final weights);
    build(L) -> the models, whose functrans copies get torch's initial state_dicts through
    torch.save / ft.load. Compares the two records."""
    torch.manual_seed(0)
    ft.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    ft.set_default_dtype(ft.float64)
    try:
        tmodels, fmodels = build(torch), build(ft)
        for t, f in zip(tmodels, fmodels):
            buf = io.BytesIO()
            torch.save(t.state_dict(), buf)
            buf.seek(0)
            f.load_state_dict(ft.load(buf))
        records = {}
        for L, models in ((torch, tmodels), (ft, fmodels)):
            with shared_randomness(L):
                records[L] = program(L, *models)
    finally:
        torch.set_default_dtype(old)
        ft.set_default_dtype(ft.float32)
    theirs, ours = records[torch], records[ft]
    for key in theirs:
        compare(ours[key], theirs[key], key, grad_fn=False, rtol=RTOL, atol=ATOL)
    return ours


def weights(*models):
    return {f"{i}.{k}": v.detach().clone() for i, m in enumerate(models)
            for k, v in m.state_dict().items()}


# ---------------------------------------------------------------------------------------
# mnist/main.py: Net, Adadelta, StepLR, train and test loops

def mnist_net(L):
    nn, F = L.nn, L.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(128, 16)
            self.fc2 = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(self.conv2(F.relu(self.conv1(x))))
            x = self.dropout1(F.max_pool2d(x, 2))
            x = self.dropout2(F.relu(self.fc1(L.flatten(x, 1))))
            return F.log_softmax(self.fc2(x), dim=1)
    return (Net(),)


def mnist_program(L, model):
    F = L.nn.functional
    rng = np.random.default_rng(1)
    x = rng.random((24, 1, 12, 12))
    y = rng.integers(0, 10, 24)
    data = L.utils.data.TensorDataset(L.tensor(x), L.tensor(y))
    train_loader = L.utils.data.DataLoader(data, batch_size=8)
    test_loader = L.utils.data.DataLoader(data, batch_size=12)
    optimizer = L.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = L.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    losses, tests = [], []
    for epoch in range(2):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        test_loss, correct = 0, 0
        with L.no_grad():
            for data, target in test_loader:
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        tests.append((test_loss / len(test_loader.dataset), correct))
        scheduler.step()
    return {"losses": losses, "tests": tests, "lr": scheduler.get_last_lr(),
            "weights": weights(model)}


CASES["example_programs:mnist"] = lambda: run_both(mnist_program, mnist_net)


# ---------------------------------------------------------------------------------------
# vae/main.py: the VAE, reparameterization with randn_like, BCE + KLD, Adam

def vae_net(L):
    nn, F = L.nn, L.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc21, self.fc22 = nn.Linear(36, 20), nn.Linear(20, 4), nn.Linear(20, 4)
            self.fc3, self.fc4 = nn.Linear(4, 20), nn.Linear(20, 36)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = L.exp(0.5 * logvar)
            eps = L.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            return L.sigmoid(self.fc4(F.relu(self.fc3(z))))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, 36))
            return self.decode(self.reparameterize(mu, logvar)), mu, logvar
    return (VAE(),)


def vae_program(L, model):
    F = L.nn.functional

    def loss_function(recon_x, x, mu, logvar):
        bce = F.binary_cross_entropy(recon_x, x.view(-1, 36), reduction="sum")
        kld = -0.5 * L.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld

    x = L.tensor(np.random.default_rng(2).random((4, 8, 1, 6, 6)))
    optimizer = L.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    model.train()
    for data in x:
        optimizer.zero_grad()
        recon, mu, logvar = model(data)
        loss = loss_function(recon, data, mu, logvar)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with L.no_grad():
        recon, mu, logvar = model(x[0])
        test = loss_function(recon, x[0], mu, logvar).item()
        sample = model.decode(L.randn(5, 4))
    return {"losses": losses, "test": test, "sample": sample, "weights": weights(model)}


CASES["example_programs:vae"] = lambda: run_both(vae_program, vae_net)


# ---------------------------------------------------------------------------------------
# dcgan/main.py: ConvTranspose2d generator, discriminator, BCELoss, Adam (0.5, 0.999)

NZ = 4


def dcgan_nets(L):
    nn = L.nn

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            L.nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            L.nn.init.normal_(m.weight, 1.0, 0.02)
            L.nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(NZ, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
                nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
                nn.ConvTranspose2d(8, 1, 4, 2, 1, bias=False), nn.Tanh())

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(1, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid())

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    return netG, netD


def dcgan_program(L, netG, netD):
    criterion = L.nn.BCELoss()
    fixed_noise = L.randn(6, NZ, 1, 1)
    optimizerD = L.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = L.optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    real = np.tanh(np.random.default_rng(3).standard_normal((3, 6, 1, 16, 16)))
    losses = []
    for real_cpu in L.tensor(real):
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = L.full((batch_size,), 1, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = L.randn(batch_size, NZ, 1, 1)
        fake = netG(noise)
        label.fill_(0)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(1)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        losses.append((errD.item(), errG.item(), D_x, D_G_z1, output.mean().item()))
    with L.no_grad():
        fake = netG(fixed_noise)
    return {"losses": losses, "fake": fake, "weights": weights(netG, netD)}


CASES["example_programs:dcgan"] = lambda: run_both(dcgan_program, dcgan_nets)


# ---------------------------------------------------------------------------------------
# word_language_model: RNNModel / TransformerModel, NLLLoss, clip_grad_norm_, manual SGD

NTOKEN, NINP = 20, 8


def wlm_net(kind):
    def build(L):
        nn, F = L.nn, L.nn.functional

        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.2)
                self.encoder = nn.Embedding(NTOKEN, NINP)
                self.rnn = getattr(nn, kind)(NINP, NINP, 2)
                self.decoder = nn.Linear(NINP, NTOKEN)
                self.decoder.weight = self.encoder.weight           # --tied

            def forward(self, input, hidden):
                output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
                decoded = self.decoder(self.drop(output)).view(-1, NTOKEN)
                return F.log_softmax(decoded, dim=1), hidden

            def init_hidden(self, bsz):
                weight = next(self.parameters())
                if kind == "LSTM":
                    return (weight.new_zeros(2, bsz, NINP), weight.new_zeros(2, bsz, NINP))
                return weight.new_zeros(2, bsz, NINP)

        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, dropout=0.1, max_len=64):
                super().__init__()
                self.dropout = nn.Dropout(p=dropout)
                pe = L.zeros(max_len, d_model)
                position = L.arange(0, max_len, dtype=L.float).unsqueeze(1)
                div_term = L.exp(L.arange(0, d_model, 2).float() *
                                 (-math.log(10000.0) / d_model))
                pe[:, 0::2] = L.sin(position * div_term)
                pe[:, 1::2] = L.cos(position * div_term)
                self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

            def forward(self, x):
                return self.dropout(x + self.pe[:x.size(0), :])

        class TransformerModel(nn.Transformer):
            def __init__(self):
                super().__init__(d_model=NINP, nhead=2, dim_feedforward=16,
                                 num_encoder_layers=2, dropout=0.0)
                self.src_mask = None
                self.pos_encoder = PositionalEncoding(NINP, 0.2)
                self.input_emb = nn.Embedding(NTOKEN, NINP)
                self.decoder = nn.Linear(NINP, NTOKEN)

            def forward(self, src):
                mask = L.log(L.tril(L.ones(len(src), len(src))))
                src = self.pos_encoder(self.input_emb(src) * math.sqrt(NINP))
                output = self.decoder(self.encoder(src, mask=mask))
                return F.log_softmax(output, dim=-1)

        return (TransformerModel() if kind == "Transformer" else RNNModel(),)
    return build


def wlm_program(kind):
    def program(L, model):
        criterion = L.nn.NLLLoss()
        corpus = np.random.default_rng(4).integers(0, NTOKEN, 3 * 21)
        train_data = L.tensor(corpus).view(3, -1).t().contiguous()      # batchify

        def repackage_hidden(h):
            return h.detach() if isinstance(h, L.Tensor) else tuple(
                repackage_hidden(v) for v in h)

        lr, losses, norms = 20.0, [], []
        model.train()
        if kind != "Transformer":
            hidden = model.init_hidden(3)
        for i in range(0, train_data.size(0) - 1, 5):
            seq_len = min(5, len(train_data) - 1 - i)
            data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].view(-1)
            model.zero_grad()
            if kind == "Transformer":
                output = model(data).view(-1, NTOKEN)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            norms.append(L.nn.utils.clip_grad_norm_(model.parameters(), 0.25).item())
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        model.eval()
        with L.no_grad():
            data, targets = train_data[:6], train_data[1:7].view(-1)
            if kind == "Transformer":
                out = model(data).view(-1, NTOKEN)
            else:
                out, _ = model(data, model.init_hidden(3))
            evaluation = criterion(out, targets).item()
        return {"losses": losses, "norms": norms, "eval": evaluation, "weights": weights(model)}
    return program


for _kind in ("LSTM", "GRU", "Transformer"):
    CASES[f"example_programs:word_language_model:{_kind}"] = (
        lambda k=_kind: run_both(wlm_program(k), wlm_net(k)))


oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_oracle_example_programs(case_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.case(case_id, CASES[case_id])
