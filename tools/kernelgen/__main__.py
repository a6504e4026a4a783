import sys

from tools.kernelgen.cli import main

if __name__ == "__main__":
    sys.exit(main())
