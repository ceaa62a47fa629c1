import sys

from streamseg.cli import main

# Guarded: a spawned child (the model's own process) imports this module as
# __mp_main__ and must not run the command line again.
if __name__ == "__main__":
    sys.exit(main())
