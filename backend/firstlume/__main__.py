import sys

from firstlume.cli import main

sys.exit(main())
