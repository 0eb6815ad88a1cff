"""`python -m gpudoctor` runs the same CLI as the `gpudoctor` script."""

from gpudoctor.cli import main

if __name__ == "__main__":
    main()
