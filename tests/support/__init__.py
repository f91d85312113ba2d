"""The tests' shared helpers: one package, imported as ``from support.<module> import ...``."""
