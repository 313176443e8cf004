"""LLM rewrite passes behind verification: an OpenAI-compatible client with a reply cache
(`client`, `settings`, `session`), the gated rewrite loop (`loop`), and its tasks: CuIR
lift and transfer (`ir_rewrites`, used by the llm-lift / llm-transfer passes) and CUDA
repair by line-span edits (`repair`). The openai package is imported only when a request
is sent. See docs/llm.md.
"""
