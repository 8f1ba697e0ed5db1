"""torch.hub's names, so that programs importing them load; every call that would download
raises, naming what to do instead: functrans has no model hub and reaches no network. Save
the checkpoint file yourself (torch.hub.load_state_dict_from_url's file, a release asset) and
read it with ft.load(path), which reads PyTorch's .pt/.pth zip files without running code."""
from __future__ import annotations

import os

__all__ = ["load", "list", "help", "load_state_dict_from_url", "download_url_to_file",
           "get_dir", "set_dir"]

_DIR = [None]


def _refuse(what, target):
    raise RuntimeError(
        f"{what}({target!r}): functrans has no model hub and downloads nothing. Fetch the file "
        "with a tool of your own, then load it locally: state = ft.load(path) (PyTorch .pt/.pth "
        "checkpoints are read without running code) and model.load_state_dict(state); a hub "
        "model's code must be copied into your program")


def load(repo_or_dir, model, *args, **kwargs):  # noqa: A001
    """torch.hub.load: refused (no hub); see the module docstring."""
    _refuse("torch.hub.load", f"{repo_or_dir}:{model}")


def list(github, force_reload=False, skip_validation=False, trust_repo=None,  # noqa: A001
         verbose=True):
    """torch.hub.list: refused (no hub)."""
    _refuse("torch.hub.list", github)


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None):  # noqa: A001
    """torch.hub.help: refused (no hub)."""
    _refuse("torch.hub.help", f"{github}:{model}")


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """torch.hub.load_state_dict_from_url: refused (no download); download the file and use
    ft.load(path)."""
    _refuse("torch.hub.load_state_dict_from_url", url)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """torch.hub.download_url_to_file: refused (no network)."""
    _refuse("torch.hub.download_url_to_file", url)


def get_dir():
    """The directory torch.hub would cache into ($TORCH_HOME/hub, ~/.cache/torch/hub, or the
    one set_dir chose); functrans never writes there."""
    if _DIR[0] is not None:
        return _DIR[0]
    home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d):
    _DIR[0] = os.path.expanduser(d)
