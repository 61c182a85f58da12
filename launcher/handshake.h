// The launcher's check of a stage's Hello: before any work, both stages must
// speak the launcher's protocol, have loaded the same resolved config, and
// expect the same boundary tensors. Pure, so it is tested directly.
#pragma once

#include <string>

#include "ipc/control_protocol.h"

namespace up {

// "" when `hello` agrees, else what differs, phrased to follow "the <stage> stage ...".
std::string HandshakeProblem(const ipc::Hello& hello, const std::string& config_sha256,
                             const std::string& boundary_signature);

}  // namespace up
