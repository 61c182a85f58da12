// data.kind = nnunet: nnU-Net's preprocessed cases (nnunet_layout.h) made
// into the cache every process trains from (common/data/case_cache.h), once.
//
// The launcher calls this before anything else reads the data. Each case is
// stamped by its files (path, size, modification time of the .b2nd, _seg.b2nd
// and .pkl, or the .npz); a case whose cache entry carries its stamp is up to
// date, found with a stat per file and no Python. Only missing or stale cases
// go to scripts/nnunet_import.py, which reads them with nnunetv2's own dataset
// class (so every format nnU-Net writes reads as nnU-Net reads it) and writes
// them in the cache's format; with a fold to train and no splits_final.json
// it also writes nnU-Net's 5-fold split, as nnUNetTrainer does. The Python is
// UP_PYTHON, else the project's .venv, else python3.
#pragma once

#include "common/config/config.h"

namespace up {

struct NnunetImportOutcome {
  int cases = 0;      // in the dataset
  int converted = 0;  // written this time
  bool wrote_splits = false;
};

// UsageError of one line for a dataset that does not match its plans, a
// Python without nnunetv2, or a conversion that failed (its last line, and
// the log file's path).
NnunetImportOutcome ImportNnunetData(const Config& config);

// Runs scripts/`script` with nnunetv2's Python (UP_PYTHON, else the
// project's .venv, else python3) on `request` (a JSON file), its output in
// `log`. Throws an Error of `exit_code` naming `what`, the script's last
// line and the log when it fails or cannot start.
void RunNnunetScript(const std::string& script, const std::string& request, const std::string& log,
                     const std::string& what, int exit_code = 2);

}  // namespace up
