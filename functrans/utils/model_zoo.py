"""torch.utils.model_zoo: load_url is torch.hub.load_state_dict_from_url, which functrans
refuses with the way to load a downloaded checkpoint instead (ft.load)."""
from ..hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
