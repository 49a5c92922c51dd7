"""What each program does with its arguments: which operands are files it opens, code it runs."""
