// RUN: cuir-opt --transfer=%examples/specs/document_mask.py --lower %examples/ir/attention_sm80.mlir | filecheck %s

// On the Ampere reference (no peeled tile) the list's positions run from 0 to partial + full; the mask-free
// positions, where the lift's needs_mask is false, are the full tiles [num_partial, num_visited).

// CHECK:      struct DocumentMaskVariant : FullAttention {
// CHECK:        return KvRange{0, num_visited, num_partial, num_visited};
// CHECK:        __device__ static int kv_tile(
