"""``python -m oscar.sim``: the same as ``oscar-sim``."""
import sys

from .simulate import main

sys.exit(main())
