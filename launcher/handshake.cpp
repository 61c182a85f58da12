// See handshake.h.
#include "launcher/handshake.h"

namespace up {

std::string HandshakeProblem(const ipc::Hello& h, const std::string& config_sha,
                             const std::string& boundary) {
  if (h.protocol != ipc::kProtocolVersion) {
    return "speaks protocol " + std::to_string(h.protocol) + " but the launcher speaks " +
           std::to_string(ipc::kProtocolVersion) +
           "; rebuild unet-pipeline, encoder_proc and decoder_proc together";
  }
  if (h.config_sha256 != config_sha) {
    return "loaded a different config (sha256 " + h.config_sha256.substr(0, 12) +
           ", the launcher's " + config_sha.substr(0, 12) +
           "); start stages only through unet-pipeline";
  }
  if (h.boundary_signature != boundary) {
    return "expects boundary tensors '" + h.boundary_signature + "' but the launcher '" + boundary +
           "'; rebuild the three binaries together";
  }
  return "";
}

}  // namespace up
