# Sample for tests/test_architecture.py: the forms of an environment read it must find.
import os
from os import environ

a = os.environ.get("X")
b = os.getenv("Y")
c = environ
