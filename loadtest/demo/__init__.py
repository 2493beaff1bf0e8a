"""The demo (`make demo`, `python -m loadtest.demo.main`; `--retail` for quantity stock): a whole
stack, a crowd at T0, paid and unpaid buyers, late and duplicate callbacks, and the verdict."""
