"""The package's version, in a module of its own so that any module can import it (the package
root imports nearly every module, so importing the version from the root would be a cycle)."""

__version__ = "0.1.0"
