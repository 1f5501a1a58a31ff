"""``python -m toposched``: the same command line as the ``toposched`` console script."""

from toposched.cli import main

if __name__ == "__main__":
    main()
