def version() -> tuple[int, int, int]:
    return 2, 28, 9
