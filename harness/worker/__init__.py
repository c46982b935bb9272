"""What goes into the sandbox: ``worker.py`` (the only process that runs candidate code) and ``wire.py`` (the
frame format both ends speak). Standard library + NumPy (+ torch) only; the host imports ``wire`` from here."""
