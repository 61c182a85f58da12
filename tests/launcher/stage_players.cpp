// See stage_players.h.
#include "tests/launcher/stage_players.h"

#include <sys/socket.h>

#include <chrono>
#include <fstream>

#include "common/base/errors.h"
#include "launcher/pipeline_resources.h"

namespace up::stage_players {

StagePlayers::StagePlayers(const PipelinePlan& plan,
                           const std::vector<std::vector<int32_t>>& positions, Answerer answer)
    : answer_(std::move(answer)) {
  std::vector<StageLink> links = UnstartedStageLinks(plan);
  std::vector<ipc::ControlChannel> far;
  for (StageLink& link : links) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw RuntimeError("socketpair failed");
    link.control.emplace(ipc::ControlChannel::Adopt(sv[0], link.key));
    link.parameter_positions = positions[static_cast<size_t>(link.stage)];
    far.push_back(ipc::ControlChannel::Adopt(sv[1], "launcher"));
  }
  group_ = std::make_unique<StageGroup>(std::move(links));
  for (size_t i = 0; i < far.size(); ++i) {
    threads_.emplace_back(&StagePlayers::Play, this, static_cast<int>(i), std::move(far[i]));
  }
}

StagePlayers::~StagePlayers() {
  group_.reset();  // the players see the launcher gone
  for (std::thread& t : threads_) t.join();
}

std::vector<Received> StagePlayers::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

void StagePlayers::Play(int process, ipc::ControlChannel channel) {
  const auto forever = std::chrono::steady_clock::now() + std::chrono::hours(1);
  for (;;) {
    ipc::ControlMessage m;
    try {
      m = channel.Receive(forever);
    } catch (const PeerGoneError&) {
      return;
    }
    Received got{process, static_cast<ipc::MsgType>(m.type), {}, 0};
    if (got.type == ipc::MsgType::kTurn) got.turn = ipc::DecodeTurn(m);
    if (got.type == ipc::MsgType::kSave) got.save_step = ipc::DecodeSave(m).step;
    if (got.type != ipc::MsgType::kFinish) {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(got);
    }
    try {
      switch (got.type) {
        case ipc::MsgType::kTurn: {
          const Answer a = answer_(process, got.turn);
          if (a.silent) break;
          if (a.failure) {
            channel.Send(ipc::Encode(*a.failure));
            return;
          }
          channel.Send(ipc::Encode(a.report));
          break;
        }
        case ipc::MsgType::kSave: {
          const ipc::SaveRequest save = ipc::DecodeSave(m);
          std::ofstream(save.path) << "stage file of step " << save.step << "\n";
          channel.Send(ipc::EncodeSaved(save.step));
          break;
        }
        case ipc::MsgType::kFinish:
          channel.Send(ipc::Encode(ipc::ByeReport{}));
          return;
        default:  // Prefetch: no answer
          break;
      }
    } catch (const PeerGoneError&) {
      return;
    }
  }
}

}  // namespace up::stage_players
