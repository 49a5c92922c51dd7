"""The bash guard: a static walk of a tree-sitter-bash parse that refuses Bash commands reaching
/memory, /skills or /incident. It imports nothing else from ``harness`` (an import-linter
contract). The entry point is ``check.check_bash``; see docs/architecture.md, "The guard".
"""
