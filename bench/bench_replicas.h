// `unet-pipeline bench replicas`: what copies of the pipeline cost on this
// machine. For each replica count (default 1, 2; 4 where the cores allow),
// one traced training run of the same global batch (bench_trainer.h):
//   step_ms       the median step time after the warm-up, and samples/s,
//                 beside the single-process trainer's on the same batch
//   exchange_ms   per stage, the time its gradient exchange with its copies
//                 took per step (the "replica exchange" spans) in the copy
//                 that came to it last, so waited least for the others; the
//                 copy that came first (exchange_with_wait_ms) adds how much
//                 sooner it came. Beside it the bytes summed (the stage's
//                 float32 gradients)
//   peer_ms       the peer: torch.distributed.all_reduce of the same bytes
//                 over Gloo between as many Python processes on the same
//                 LibTorch (bench/allreduce_peer.py), median of its runs
// CPU figures: R copies of S stages share the machine's cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up::bench {

struct ReplicasOptions {
  std::string config;
  std::vector<int> replicas;  // empty: 1, 2 (and 4 with 8 cores or more)
  int64_t steps = 6;
  int64_t warmup = 2;
  std::vector<std::string> sets;  // "key=value" overrides for every run
};

struct ReplicaStage {
  std::string stage;       // replica 0's key
  int64_t bytes = 0;       // gradients exchanged a step
  double exchange_ms = 0;  // the copy that waited least
  double waited_ms = 0;    // the copy that waited most
  double peer_ms = -1;     // -1: no peer (one replica, or it could not run)
};

struct ReplicasRow {
  int replicas = 0;
  double step_ms = 0;
  double samples_per_s = 0;
  std::vector<ReplicaStage> stages;
};

struct ReplicasReport {
  ReplicasOptions options;
  int batch_size = 0;
  double single_step_ms = 0;  // --single-process, the same config and batch
  std::string peer_note;      // why a peer is missing, if it is
  std::vector<ReplicasRow> rows;
};

// UsageError for bad options (before any run); RuntimeError if a run fails.
ReplicasReport RunReplicasBench(const ReplicasOptions& options);
std::string ReplicasJson(const ReplicasReport& report);
std::string ReplicasTable(const ReplicasReport& report);

}  // namespace up::bench
