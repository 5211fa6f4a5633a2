"""RESULTS.md, README's results block and requirements-lock.txt, generated from the committed results listed in
one manifest (:mod:`.manifest`): compute (:mod:`nsa_exp.analysis`), then render, section by section."""
