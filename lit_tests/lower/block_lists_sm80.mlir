// RUN: cuir-opt --transfer=%examples/specs/document_mask.py --lower %examples/ir/attention_sm80.mlir | filecheck %s

// On the Ampere reference (no peeled tile) the list's positions run from 0 to partial + full.

// CHECK:      struct DocumentMaskVariant : FullAttention {
// CHECK:        return KvRange{0, num_visited, full_begin, num_visited};
// CHECK:        __device__ static int kv_tile(
