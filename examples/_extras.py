"""Progress bars and figures for the examples, from the optional `examples` extra
(`pip install -e '.[examples]'`: tqdm and matplotlib). Without it the examples run the same
and print their progress; with it they also show a progress bar (tqdm, on stderr) and save
PNG figures (matplotlib's Agg backend: no display needed, headless in CI).

Figures go to $FUNCTRANS_FIGURES if set, else to examples/figures/.
"""
import os
import sys

try:
    from tqdm import tqdm
except ImportError:
    tqdm = None

try:
    import matplotlib
    matplotlib.use("Agg")              # files only: works without a display
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

HERE = os.path.dirname(os.path.abspath(__file__))


def progress(iterable, total=None, desc=None):
    """`iterable` with a tqdm progress bar when tqdm is installed and stderr is a terminal
    (or FUNCTRANS_PROGRESS=1); the iterable itself otherwise."""
    show = os.environ.get("FUNCTRANS_PROGRESS", "1" if sys.stderr.isatty() else "0") == "1"
    if tqdm is None or not show:
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


def log(message):
    """print, written above the progress bar when one is shown."""
    if tqdm is not None:
        tqdm.write(message)
    else:
        print(message)


def figure(name, draw, note=""):
    """Save a PNG drawn by draw(plt) as <figures>/<name>.png and say where; without
    matplotlib, say how to get it. Returns the path, or None."""
    if plt is None:
        print(f"(figure {name}.png not drawn: pip install -e '.[examples]' for matplotlib)")
        return None
    folder = os.environ.get("FUNCTRANS_FIGURES") or os.path.join(HERE, "figures")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.png")
    fig = draw(plt)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"figure: {path}{' (' + note + ')' if note else ''}")
    return path
