// The CUDA caching allocator's setting every process of a run trains with.
//
// A stage that takes turns frees and allocates tensors of many sizes (its
// units rebuilt, the boundary received, its state parked and fetched back):
// with fixed-size segments the caching allocator keeps split blocks that
// no later request fits, its reserve over the live bytes. Expandable
// segments (one segment per stream that grows and shrinks by pages) leave
// no such gaps, so each process sets PYTORCH_CUDA_ALLOC_CONF to
// "expandable_segments:True" at its start, before any CUDA allocation, and
// the stages it starts inherit it. A PYTORCH_CUDA_ALLOC_CONF (or the newer
// PYTORCH_ALLOC_CONF) the user set is left as it is. The CUDA IPC transport
// shares a slab of its own (cudaMalloc, ipc/cuda_ipc_channel.cpp), never a
// caching-allocator block, so the setting does not touch it. Torch-free.
#pragma once

#include <string>

namespace up {

inline constexpr const char* kCudaAllocConfVar = "PYTORCH_CUDA_ALLOC_CONF";
inline constexpr const char* kCudaAllocConfDefault = "expandable_segments:True";

// Sets PYTORCH_CUDA_ALLOC_CONF to kCudaAllocConfDefault unless the user set
// it or PYTORCH_ALLOC_CONF. Call at the start of main, before any thread.
void UseCudaAllocatorDefaults();

// What is in effect, for plan and the logs: "PYTORCH_CUDA_ALLOC_CONF=..."
// or "PYTORCH_ALLOC_CONF=...", the user's or ours.
std::string CudaAllocatorConfigText();

}  // namespace up
