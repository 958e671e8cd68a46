"""otelmw's version: a leaf module, so that anything may name it without importing the package."""

__version__ = "0.1.0"
