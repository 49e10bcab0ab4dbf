"""The suite runs against the installed package (scripts/python_test.sh installs it into a venv); the source
tree's python/ is never on sys.path here."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # reference.py
