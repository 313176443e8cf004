"""CUDA C++ sources for the lifter: tree-sitter parsing with located errors, the primitives' inline PTX."""
