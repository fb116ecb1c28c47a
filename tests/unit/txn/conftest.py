import sys
from pathlib import Path

# The harness sits beside the tests; make it importable however pytest was started.
sys.path.insert(0, str(Path(__file__).parent))
