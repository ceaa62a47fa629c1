import sys

from streamseg.cli import main

sys.exit(main())
