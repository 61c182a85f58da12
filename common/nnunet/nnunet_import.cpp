// See nnunet_import.h.
#include "common/nnunet/nnunet_import.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/base/child_process.h"
#include "common/base/errors.h"
#include "common/base/file_lock.h"
#include "common/base/fs_util.h"
#include "common/base/json_writer.h"
#include "common/base/logging.h"
#include "common/data/case_cache.h"
#include "common/formats/npy_io.h"
#include "common/nnunet/nnunet_layout.h"

namespace up {
namespace {

namespace fs = std::filesystem;

// Whether CACHE/<case> holds the case as stamped: its case.json carries the
// stamp and both arrays have the shapes it gives (headers only: the SHA-256
// is checked once, right after conversion).
bool UpToDate(const std::string& dir, const std::string& stamp) {
  std::error_code ec;
  if (!fs::is_regular_file(dir + "/case.json", ec)) return false;
  try {
    const CacheCaseMeta m = ReadCaseMeta(dir);
    if (m.source_stamp != stamp) return false;
    std::vector<int64_t> image{m.channels};
    image.insert(image.end(), m.shape.begin(), m.shape.end());
    return ReadNpyHeader(dir + "/image.npy").shape == image &&
           ReadNpyHeader(dir + "/labels.npy").shape == m.shape;
  } catch (const Error&) {
    return false;
  }
}

std::string ProjectRoot() { return UP_SOURCE_DIR; }

std::string PythonPath() {
  if (const char* p = std::getenv("UP_PYTHON"); p && *p) return p;
  const std::string venv = ProjectRoot() + "/.venv/bin/python";
  std::error_code ec;
  if (fs::exists(venv, ec)) return venv;
  return "/usr/bin/python3";
}

std::string Strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + JsonWriter::Quote(v[i]);
  return s + "]";
}

}  // namespace

void RunNnunetScript(const std::string& script, const std::string& request, const std::string& log,
                     const std::string& what, int exit_code) {
  ChildOptions o;
  o.name = script;
  o.executable = PythonPath();
  o.args = {ProjectRoot() + "/scripts/" + script, request};
  o.output_file = log;
  ExitStatus status;
  try {
    ChildProcess child = ChildProcess::Spawn(o);
    status = child.Wait(ChildProcess::Deadline::max());
  } catch (const UsageError& e) {
    throw Error("nnU-Net: cannot run Python for " + what + " (" + e.what() +
                    "); set UP_PYTHON to a Python with nnunetv2",
                exit_code);
  }
  if (!status.success()) {
    throw Error("nnU-Net: " + what + " failed (" + status.Describe() + "): " + LastLineOf(log) +
                    " (log: " + log + ")",
                exit_code);
  }
}

NnunetImportOutcome ImportNnunetData(const Config& config) {
  const DataConfig& d = config.data;
  const NnunetDataset ds = FindNnunetDataset(d.dataset, d.preprocessed, d.plans, d.configuration);
  const std::vector<NnunetCaseFiles> cases = ListNnunetCases(ds);
  NnunetImportOutcome out;
  out.cases = static_cast<int>(cases.size());

  // Region datasets keep each region's class locations (by region), so the
  // regions are part of every case's stamp.
  std::string regions = "[";
  for (size_t r = 0; r < ds.regions.size(); ++r)
    regions += (r ? "," : "") + JsonWriter::Array(ds.regions[r]);
  regions += "]";
  const std::string version = ds.regions.empty() ? "nnunet-import 1" : "nnunet-import 1 " + regions;
  // What is missing or stale: the cases, the index, nnU-Net's split.
  std::vector<std::string> names, todo_names, todo_stamps;
  bool index_current = false, need_splits = false;
  auto survey = [&] {
    names.clear();
    todo_names.clear();
    todo_stamps.clear();
    for (const NnunetCaseFiles& c : cases) {
      names.push_back(c.name);
      const std::string stamp = FilesStamp(version, c.files);
      if (!UpToDate(d.cache + "/" + c.name, stamp)) {
        todo_names.push_back(c.name);
        todo_stamps.push_back(stamp);
      }
    }
    std::error_code ec;
    index_current = false;
    if (fs::is_regular_file(d.cache + "/cache.json", ec)) {
      try {
        const CacheIndex index = ReadCacheIndex(d.cache);
        index_current = index.cases == names && index.label_values.size() == ds.label_names.size();
      } catch (const Error&) {
      }
    }
    need_splits = !d.AllFolds() && !fs::exists(ds.splits_file(), ec);
    return !todo_names.empty() || !index_current || need_splits;
  };
  auto up_to_date = [&] {
    LogInfo(Str("nnU-Net: ", cases.size(), " cases of ", ds.name, " (", ds.data_identifier,
                ") up to date in ", d.cache));
    return out;
  };
  if (!survey()) return up_to_date();  // no lock needed (a read-only cache works)
  // nnU-Net's split holds out a fifth of the cases in each of 5 folds: it
  // needs at least 5 (sklearn's KFold would refuse in Python's words).
  if (need_splits && cases.size() < 5) {
    throw UsageError(Str("data.fold = '", d.fold, "': ", ds.name, " has ", cases.size(),
                         " case(s), too few for nnU-Net's 5-fold split, and no ", ds.splits_file(),
                         "; write that file with your own folds, or set ",
                         "data.fold: all to train on every case"));
  }

  std::error_code ec;
  fs::create_directories(d.cache, ec);
  if (ec) {
    throw UsageError("data.cache = '" + d.cache + "': cannot create it (" + ec.message() +
                     "); set data.cache to a writable folder");
  }
  // One run converts at a time (five folds started at once share the
  // cache); whoever waited finds the work done, or what is left of it.
  const FileLock lock(d.cache + "/.import.lock", [&] {
    LogInfo(
        Str("nnU-Net: another run is converting ", ds.name, " into ", d.cache, "; waiting for it"));
  });
  if (!survey()) return up_to_date();
  std::string todo = "[";
  for (size_t i = 0; i < todo_names.size(); ++i) {
    todo += std::string(i ? "," : "") + "{\"name\":" + JsonWriter::Quote(todo_names[i]) +
            ",\"stamp\":" + JsonWriter::Quote(todo_stamps[i]) + "}";
  }
  todo += "]";
  JsonWriter req;
  req.Field("data_dir", ds.data_dir)
      .Field("cache", d.cache)
      .Raw("cases", todo)
      .Raw("all_cases", Strings(names))
      .Raw("channel_names", Strings(ds.channel_names))
      .Raw("label_names", Strings(ds.label_names))
      .Raw("regions", ds.regions.empty() ? "null" : regions)
      .Raw("splits_file", !d.AllFolds() ? JsonWriter::Quote(ds.splits_file()) : "null");
  const std::string request = d.cache + "/import-request.json";
  const std::string log = d.cache + "/import.log";
  WriteFileAtomic(request, req.str() + "\n");

  LogInfo(Str("nnU-Net: converting ", todo_names.size(), " of ", cases.size(), " cases of ",
              ds.name, " (", ds.data_identifier, ") into ", d.cache,
              " with nnunetv2's reader; later runs reuse them"));
  const auto start = std::chrono::steady_clock::now();
  RunNnunetScript("nnunet_import.py", request, log, "importing " + ds.name);
  // What was written is checked whole once: stamps, shapes and SHA-256.
  for (size_t i = 0; i < todo_names.size(); ++i) {
    const std::string dir = d.cache + "/" + todo_names[i];
    const CacheCaseMeta m = ReadCaseMeta(dir);
    std::string why = m.source_stamp == todo_stamps[i] ? VerifyCachedCase(dir, m)
                                                       : "its stamp is not the one asked for";
    if (!why.empty())
      throw UsageError("nnU-Net: the import of case '" + todo_names[i] + "' is not whole: " + why);
  }
  fs::remove(request, ec);
  out.converted = static_cast<int>(todo_names.size());
  out.wrote_splits = need_splits && fs::exists(ds.splits_file(), ec);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof(took), "%.1f s", seconds);
  LogInfo(Str("nnU-Net: converted ", out.converted, " cases in ", took,
              out.wrote_splits ? "; wrote nnU-Net's 5-fold split to " + ds.splits_file() : ""));
  return out;
}

}  // namespace up
