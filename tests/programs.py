"""Programs several test areas run."""

FIBONACCI_PROGRAM = """def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

print(fibonacci(39))
"""
"""Prints the 39th Fibonacci number, 63245986 (fib(1) = fib(2) = 1)."""
