// The CUDA IPC transport (`pipeline.transport: cuda_ipc`): boundary tensors
// stay on the GPU. The producer allocates one device slab with cudaMalloc
// for the whole run (slots x slot bytes, the same layout as a ring's
// payload), exports it with cudaIpcGetMemHandle, and the consumer opens it
// once. Message headers and tensor tables still travel through a ShmRing
// whose payload is external (headers only), so ordering, sizes, timeouts and
// dead-peer detection are the ring's.
//
// Synchronisation per slot uses interprocess events
// (cudaEventInterprocess | cudaEventDisableTiming): the producer records
// `ready[s]` after its copies into slot s, the consumer's stream waits on it;
// the consumer records `done[s]` when it releases slot s, and the producer's
// stream waits on it before writing the slot again, so a slot stays alive
// until the consumer is done with it. Handles are exchanged through a small
// shared segment, `<ring name>-cuda`, created (zeroed) by the launcher.
//
// The CUDA code is in cuda_ipc_channel.cpp; without CUDA support the
// factories below end with one clear error (cuda_ipc_channel_stub.cpp).
#pragma once

#include <memory>
#include <string>

#include "ipc/tensor_channel.h"

namespace up::ipc {

inline constexpr uint32_t kMaxCudaIpcSlots = 64;

// Size of the handle segment the launcher creates for each cuda_ipc ring.
size_t CudaIpcHandleSegmentBytes();

// `ring` (external payload) and the handle segment `<ring name>-cuda` must
// exist; `device_index` is this process's CUDA device.
std::unique_ptr<TensorSender> MakeCudaIpcSender(ShmRing& ring, int device_index);
std::unique_ptr<TensorReceiver> MakeCudaIpcReceiver(ShmRing& ring, int device_index);

}  // namespace up::ipc
