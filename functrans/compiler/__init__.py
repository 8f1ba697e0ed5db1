"""`ft.compile`: the facade's jit (the top layer). `capture.py` captures PyTorch-style code
into a jaxpr; `compiled.py` guards, lowers and calls it. Nothing is imported here, so that
importing the capture does not load the rest.
"""
