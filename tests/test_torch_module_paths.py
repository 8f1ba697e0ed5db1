"""The module paths PyTorch's examples import beyond nn: torch.testing (assert_close with
torch's tolerances and messages, make_tensor), torch.hub / utils.model_zoo (names whose calls
refuse, saying how to load a downloaded file), torch.profiler (wall time of record_function
regions), torch.jit.script/trace (refusals naming ft.compile), torch.multiprocessing
(Python's, plus spawn), torch.version, torch.utils.data.sampler / dataloader."""
import importlib
import json
import os
import time

import pytest

import functrans as ft


def test_assert_close_passes_within_torchs_tolerances_and_says_why_not():
    T = ft.testing
    T.assert_close(ft.tensor([1.0, 2.0]), ft.tensor([1.0, 2.0 + 1e-6]))   # float32: 1.3e-6 rel
    T.assert_close({"a": [1, ft.ones(2)]}, {"a": [1, ft.ones(2)]})
    T.assert_close(ft.tensor([float("nan")]), ft.tensor([float("nan")]), equal_nan=True)
    with pytest.raises(AssertionError) as e:
        T.assert_close(ft.tensor([1.0, 2.0, 3.0]), ft.tensor([1.0, 2.1, 3.0]))
    assert str(e.value).startswith("Tensor-likes are not close!\n\nMismatched elements: 1 / 3 "
                                   "(33.3%)\nGreatest absolute difference: 0.0999999046")
    assert "at index (1,) (up to 1e-05 allowed)" in str(e.value)
    assert "(up to 1.3e-06 allowed)" in str(e.value)
    with pytest.raises(AssertionError, match=r"Tensor-likes are not equal!"):
        T.assert_close(ft.tensor([1, 2]), ft.tensor([1, 3]))
    with pytest.raises(AssertionError, match=r"The values for attribute 'dtype' do not match: "
                                             r"torch.float32 != torch.float64\."):
        T.assert_close(ft.ones(2), ft.ones(2, dtype=ft.float64))
    with pytest.raises(AssertionError, match=r"The values for attribute 'shape' do not match: "
                                             r"torch.Size\(\[2\]\) != torch.Size\(\[3\]\)\."):
        T.assert_close(ft.ones(2), ft.ones(3))
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]"):
        T.assert_close([ft.ones(1), ft.ones(1)], [ft.ones(1), ft.zeros(1)])
    with pytest.raises(AssertionError, match=r"^custom$"):
        T.assert_close(1.0, 2.0, msg="custom")
    T.assert_close(ft.ones(2), ft.ones(2, dtype=ft.float64), check_dtype=False)


def test_make_tensor_draws_in_range_from_the_global_generator():
    ft.manual_seed(3)
    a = ft.testing.make_tensor(4, 5, dtype=ft.float32, device="cpu", low=-2, high=3)
    ft.manual_seed(3)
    b = ft.testing.make_tensor((4, 5), dtype=ft.float32)
    assert a.shape == (4, 5) and a.dtype == ft.float32
    assert float(a.min()) >= -2 and float(a.max()) < 3 and not ft.equal(a, b)
    ft.manual_seed(3)
    assert ft.equal(a, ft.testing.make_tensor(4, 5, dtype=ft.float32, low=-2, high=3))
    i = ft.testing.make_tensor(1000, dtype=ft.int64, low=0, high=3, exclude_zero=True)
    assert set(i.tolist()) == {1, 2}
    assert ft.testing.make_tensor(3, dtype=ft.bool).dtype == ft.bool
    g = ft.testing.make_tensor(2, dtype=ft.float64, requires_grad=True)
    assert g.requires_grad and g.is_leaf


def test_hub_and_model_zoo_refuse_naming_ft_load():
    hub = importlib.import_module("functrans.hub")
    zoo = importlib.import_module("functrans.utils.model_zoo")
    for call in (lambda: hub.load("pytorch/vision", "resnet18"),
                 lambda: hub.load_state_dict_from_url("https://x/y.pth"),
                 lambda: zoo.load_url("https://x/y.pth"),
                 lambda: hub.download_url_to_file("https://x/y", "/tmp/y")):
        with pytest.raises(RuntimeError, match=r"no model hub.*ft\.load\(path\)"):
            call()
    assert hub.get_dir().endswith("hub")


def test_profiler_records_the_wall_time_of_record_function_regions(tmp_path):
    P = importlib.import_module("functrans.profiler")
    with P.profile(activities=[P.ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            with P.record_function("step"):
                with P.record_function("inner"):
                    time.sleep(0.002)

        @P.record_function("decorated")
        def f():
            return 7
        assert f() == 7
    with P.record_function("outside"):         # no profile active: not recorded
        pass
    avg = {a.key: a for a in prof.key_averages()}
    assert set(avg) == {"step", "inner", "decorated"}
    assert avg["step"].count == 2 and avg["inner"].cpu_time_total >= 4000     # microseconds
    assert avg["step"].cpu_time_total >= avg["inner"].cpu_time_total
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=2)
    assert table.index("step") < table.index("inner") and "decorated" not in table
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in events].count("inner") == 2 and events[0]["ph"] == "X"
    for kw in ({"record_shapes": True}, {"activities": [P.ProfilerActivity.CUDA]},
               {"schedule": object()}):
        with pytest.raises(NotImplementedError, match="record_function regions"):
            P.profile(**kw)


def test_torch_jit_names_are_attributes_of_ft_jit():
    with pytest.raises(NotImplementedError, match=r"torch\.jit\.script: .*ft\.compile"):
        ft.jit.script(lambda x: x)
    with pytest.raises(NotImplementedError, match=r"torch\.jit\.trace: .*ft\.compile"):
        ft.jit.trace(ft.nn.Linear(2, 2), ft.ones(1, 2))
    with pytest.raises(NotImplementedError, match=r"torch\.jit\.load: .*state_dict"):
        ft.jit.load("model.pt")
    assert ft.jit.ignore(len) is len and ft.jit.unused()(len) is len
    assert ft.jit.is_scripting() is False
    assert float(ft.jit(lambda x: x * 2)(ft.numpy.ones(())).item()) == 2.0   # still JAX's jit


def _child(i, path):
    with open(os.path.join(path, f"{i}.txt"), "w") as f:
        f.write(str(i * 10))


def _failing_child(i):
    if i == 1:
        raise ValueError("child one fails")


def test_multiprocessing_is_pythons_with_torchs_spawn(tmp_path):
    mp = importlib.import_module("functrans.multiprocessing")
    import multiprocessing
    assert mp.Process is multiprocessing.Process and mp.Queue is multiprocessing.Queue
    assert "shared" in mp.__doc__       # says what it does not do
    mp.spawn(_child, args=(str(tmp_path),), nprocs=2, start_method="fork")
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["0", "10"]
    with pytest.raises(mp.ProcessRaisedException, match="child one fails"):
        mp.spawn(_failing_child, nprocs=2, start_method="fork")


def test_version_and_data_module_paths():
    v = importlib.import_module("functrans.version")
    assert v.__version__ == ft.__version__ and v.library == "functrans" and v.cuda is None
    sampler = importlib.import_module("functrans.utils.data.sampler")
    loader = importlib.import_module("functrans.utils.data.dataloader")
    assert sampler.RandomSampler is ft.utils.data.RandomSampler
    assert loader.DataLoader is ft.utils.data.DataLoader
    assert loader.default_collate is ft.utils.data.default_collate


def test_backends_mps_says_no():
    # mnist_hogwild and legacy ask `args.mps and torch.backends.mps.is_available()`
    mps = importlib.import_module("functrans.backends.mps")
    assert mps.is_available() is False and mps.is_built() is False


def test_cuda_queries_the_distributed_examples_make():
    from functrans.core.devices import DeviceError, cuda_available
    assert ft.cuda.is_bf16_supported() is False
    if cuda_available():
        ft.cuda.set_device(0)
        before = ft.cuda.memory_allocated()
        x = ft.ones(1 << 20, device="cuda")
        assert ft.cuda.memory_allocated(0) >= before + x.numel() * 4
        assert ft.cuda.memory_reserved() >= ft.cuda.memory_allocated()
    else:
        assert ft.cuda.memory_allocated() == 0 and ft.cuda.memory_reserved("cuda:0") == 0
        with pytest.raises(DeviceError, match="CuPy|GPU|CUDA"):
            ft.cuda.set_device(0)
        ft.cuda.set_device(-1)          # torch: a negative index is a no-op
