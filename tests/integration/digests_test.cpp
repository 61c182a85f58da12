// No behaviour change, proven by digests: tests/data/digests.tsv holds the
// `param_digest` of runs that cover every way of training (single process;
// the pipeline keeping, recomputing by levels and by blocks, offloading; four
// parts; two replicas; fp16 and bf16; the nnunet and torchscript model kinds;
// `data.kind: nnunet`; a resumed run), recorded once on a known-good commit.
// Each test reruns one line and compares. A restructuring that keeps every
// line equal changed no arithmetic.
//
// The digests are bits of one CPU's kernels: every run is held to AVX2
// kernels (HoldKernelsToAvx2), so a machine with AVX-512 trains the bits
// one without it recorded; the file's `# machine:` line says which CPU and
// LibTorch recorded them, and on another the test skips with that reason
// (re-record on a known-good commit with UP_RECORD_DIGESTS=1, which
// rewrites the digest column and the machine line).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/command.h"

namespace up::test {
namespace {

namespace fs = std::filesystem;

const char* kFile = "tests/data/digests.tsv";

struct DigestCase {
  std::string name;
  std::string digest;
  std::string needs;                           // "-", "bundle" or "nnunet_data"
  std::vector<std::vector<std::string>> runs;  // launcher argument lists, in order
};

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// One line: name TAB digest TAB needs TAB args [&& args ...].
std::vector<DigestCase> ReadCases(std::string* machine) {
  std::ifstream in(SourcePath(kFile));
  std::vector<DigestCase> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# machine: ", 0) == 0) *machine = line.substr(11);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, '\t');) cols.push_back(f);
    if (cols.size() != 4) throw std::runtime_error(std::string(kFile) + ": bad line: " + line);
    DigestCase c{cols[0], cols[1], cols[2], {}};
    std::vector<std::string> run;
    for (const std::string& w : Words(cols[3])) {
      if (w == "&&") {
        c.runs.push_back(run);
        run.clear();
      } else {
        run.push_back(w);
      }
    }
    c.runs.push_back(run);
    out.push_back(c);
  }
  return out;
}

// The CPU and the LibTorch that made this machine's digests.
std::string ThisMachine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string model = "unknown CPU";
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string version = Up({"--version"}).output;
  const size_t at = version.find("LibTorch ");
  version = at == std::string::npos ? "LibTorch ?" : version.substr(at);
  version = version.substr(0, version.find_first_of(" \n,)", 9));
  return model + " | " + version + " | kernels held to AVX2";
}

std::string Substitute(std::string word, const std::map<std::string, std::string>& vars) {
  for (const auto& [key, value] : vars) {
    for (size_t at; (at = word.find(key)) != std::string::npos;)
      word.replace(at, key.size(), value);
  }
  return word;
}

// The ctest fixture's nnU-Net dataset (nnunet_data), copied into `dir`.
bool NnunetData(const TempDir& dir, std::string* why) {
  const std::string shared = std::string(UP_BIN_DIR) + "/../test-data/nnunet";
  if (!fs::exists(shared + "/ready")) {
    const CommandResult made =
        RunCommand({SourcePath("tests/support/make_nnunet_preprocessed.sh"), shared}, 600);
    if (made.exit_code != 0) {
      *why = "making the nnU-Net dataset failed: " + made.output;
      return false;
    }
  }
  fs::copy(shared + "/preprocessed", dir / "pre", fs::copy_options::recursive);
  return true;
}

// scripts/export_unet.py's bundle of scripts/unet_reference.py's 2-D U-Net.
bool Bundle(const TempDir& dir, std::string* why) {
  const std::string python = SourcePath(".venv/bin/python");
  const CommandResult r = RunCommand(
      {python, SourcePath("scripts/export_unet.py"), "unet_reference:UNet", "--kwargs",
       R"({"dims": 2, "in_channels": 2, "num_classes": 3, "features": [4, 8], "norm": "batch"})",
       "--example", "1x2x32x32", "--out", dir / "bundle"},
      300);
  if (r.exit_code != 0) *why = "exporting the bundle failed: " + r.output;
  return r.exit_code == 0;
}

// Rewrites `name`'s digest and the machine line; ctest runs the cases in
// parallel processes, so each rewrite holds an exclusive lock on the file.
void RecordDigest(const std::string& name, const std::string& digest) {
  const int fd = open(SourcePath(kFile).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << kFile;
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  std::ifstream in(SourcePath(kFile));
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# machine: ", 0) == 0) {
      line = "# machine: " + ThisMachine();
    } else if (line.rfind(name + "\t", 0) == 0) {
      const size_t a = line.find('\t'), b = line.find('\t', a + 1);
      line = line.substr(0, a + 1) + digest + line.substr(b);
    }
    out << line << "\n";
  }
  std::ofstream(SourcePath(kFile)) << out.str();
  close(fd);  // and the lock with it
}

class Digests : public ::testing::TestWithParam<std::string> {};

TEST_P(Digests, EqualTheRecordedRun) {
  std::string machine;
  const std::vector<DigestCase> cases = ReadCases(&machine);
  const DigestCase* c = nullptr;
  for (const DigestCase& d : cases) c = d.name == GetParam() ? &d : c;
  ASSERT_NE(c, nullptr) << GetParam() << " is not in " << kFile;
  HoldKernelsToAvx2();
  const bool record = std::getenv("UP_RECORD_DIGESTS") != nullptr;
  const std::string here = ThisMachine();
  if (!record && here != machine)
    GTEST_SKIP() << kFile << " was recorded on " << machine << "; this is " << here
                 << ": other kernels give other bits (re-record on a known-good commit with "
                    "UP_RECORD_DIGESTS=1)";
  TempDir dir;
  std::string why;
  if (c->needs == "bundle") {
    ASSERT_TRUE(Bundle(dir, &why)) << why;
  }
  if (c->needs == "nnunet_data") {
    ASSERT_TRUE(NnunetData(dir, &why)) << why;
  }
  const std::map<std::string, std::string> vars{
      {"{src}", SourcePath("")}, {"{dir}", dir.path()}, {"{run}", dir / "run"}};
  for (const std::vector<std::string>& words : c->runs) {
    std::vector<std::string> args;
    for (const std::string& w : words) args.push_back(Substitute(w, vars));
    const CommandResult r = Up(args, 600);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const std::string digest = RunDigest(dir / "run");
  ASSERT_EQ(digest.size(), 64u) << Slurp(dir / "run/summary.json");
  if (record) {
    RecordDigest(c->name, digest);
    return;
  }
  EXPECT_EQ(digest, c->digest) << c->name << " trains other bits than " << kFile
                               << " recorded: a behaviour change";
}

std::vector<std::string> CaseNames() {
  std::string machine;
  std::vector<std::string> names;
  for (const DigestCase& c : ReadCases(&machine)) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Recorded, Digests, ::testing::ValuesIn(CaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Digests, TheFileCoversEveryWayOfTraining) {
  std::string machine;
  const std::vector<DigestCase> cases = ReadCases(&machine);
  EXPECT_GE(cases.size(), 12u);
  EXPECT_FALSE(machine.empty()) << kFile << " names no machine";
  std::string all;
  for (const DigestCase& c : cases) {
    EXPECT_EQ(c.digest.size(), 64u) << c.name << " has no recorded digest";
    for (const auto& run : c.runs)
      for (const std::string& w : run) all += w + " ";
  }
  for (const char* way :
       {"--single-process", "pipeline.activations=keep", "pipeline.activations=recompute",
        "pipeline.recompute_unit=block", "pipeline.offload=on", "pipeline.encoder_parts=2",
        "pipeline.replicas=2", "train.precision=fp16", "train.precision=bf16",
        "configs/nnunet-tiny.yaml", "model.kind=torchscript", "data.kind=nnunet", "--resume"})
    EXPECT_NE(all.find(way), std::string::npos) << kFile << " has no run with " << way;
}

}  // namespace
}  // namespace up::test
