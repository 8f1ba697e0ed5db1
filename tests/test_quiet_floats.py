"""NaN, inf and -0 are values, as in torch and JAX: functrans's own ops print no NumPy
floating-point warning when they make one (eagerly, in the facade, in jitted programs),
while the user's own NumPy calls still warn. Run in a fresh interpreter, outside pytest's
warning capture, as a user's script runs."""
import subprocess
import sys

SCRIPT = """
import warnings
import numpy as np
import functrans as ft
import functrans.numpy as fnp
ft.tensor([-1.0]).sqrt()
ft.tensor([0.0]).log()
fnp.log(np.zeros(2, np.float32))
ft.jit(lambda x: fnp.log(x) - fnp.log(x))(np.zeros(3, np.float32))
t = ft.tensor([0.0], requires_grad=True)
t.log().sum().backward()
print("functrans done", flush=True)
np.log(np.zeros(1))
"""


def test_functrans_ops_print_no_floating_point_warnings():
    proc = subprocess.run([sys.executable, "-W", "default", "-c", SCRIPT],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "functrans done" in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(lines) == 1 and "np.log" not in lines[0] and "<string>" in lines[0], \
        proc.stderr     # only the user's own np.log warned
