"""`python -m sandcrew` runs the command line."""

from sandcrew.cli import main

main()
