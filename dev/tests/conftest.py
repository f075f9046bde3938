"""The scripts under test import their neighbours (cpu_speed) as a script run from dev/ does."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
