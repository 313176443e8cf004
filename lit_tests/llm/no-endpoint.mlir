// An LLM pass with no endpoint configured fails in one line that names what
// to set, with a non-zero exit, no traceback and no output; a deterministic
// pipeline in the same environment runs as before.
// RUN: env -u CUBRIDGE_LLM_BASE_URL -u CUBRIDGE_LLM_MODEL not cuir-opt %examples/ir/attention_sm90.mlir -p 'llm-transfer{spec="%examples/specs/causal.py"}' -o %t.out 2>&1 | filecheck %s --check-prefix=ENDPOINT
// RUN: test ! -e %t.out
// RUN: env -u CUBRIDGE_LLM_BASE_URL -u CUBRIDGE_LLM_MODEL not cuir-opt %s -p 'llm-lift{source="%s"}' 2>&1 | filecheck %s --check-prefix=LIFT
// RUN: env -u CUBRIDGE_LLM_MODEL CUBRIDGE_LLM_BASE_URL=http://127.0.0.1:9/v1 not cuir-opt %s -p 'llm-lift{source="%s"}' 2>&1 | filecheck %s --check-prefix=MODEL
// RUN: env -u CUBRIDGE_LLM_BASE_URL -u CUBRIDGE_LLM_MODEL not python3 -m cubridge.tools.cuir_llm_repair %s 2>&1 | filecheck %s --check-prefix=REPAIR
// RUN: env -u CUBRIDGE_LLM_BASE_URL -u CUBRIDGE_LLM_MODEL cuir-opt %examples/ir/attention_sm90.mlir -p 'cuir-set-worker-regs{worker=producer regs=24}' | filecheck %s --check-prefix=DETERMINISTIC

// ENDPOINT-NOT: Traceback
// ENDPOINT:     {{^}}error: llm-transfer needs an OpenAI-compatible endpoint: set CUBRIDGE_LLM_BASE_URL or pass --llm-base-url (or the pass option base_url=...)
// ENDPOINT-NOT: {{.}}

// LIFT-NOT: Traceback
// LIFT:     {{^}}error: llm-lift needs an OpenAI-compatible endpoint: set CUBRIDGE_LLM_BASE_URL or pass --llm-base-url (or the pass option base_url=...)
// LIFT-NOT: {{.}}

// MODEL-NOT: Traceback
// MODEL:     {{^}}error: llm-lift needs a model name: set CUBRIDGE_LLM_MODEL or pass --llm-model (or the pass option model=...)
// MODEL-NOT: {{.}}

// REPAIR-NOT: Traceback
// REPAIR:     {{^}}error: llm-repair needs an OpenAI-compatible endpoint: set CUBRIDGE_LLM_BASE_URL or pass --llm-base-url (or the pass option base_url=...)
// REPAIR-NOT: {{.}}

// DETERMINISTIC: cuir.worker @producer threads 0 to 128 regs 24 (%instance) {
