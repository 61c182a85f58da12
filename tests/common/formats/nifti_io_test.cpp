// NIfTI volumes through Debian's library: a round trip keeps dims, spacing
// and voxel order (x fastest) for every storage type, gz or not; bad files
// are one clear UsageError naming the file.
#include "common/formats/nifti_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/base/errors.h"

namespace up {
namespace {

namespace fs = std::filesystem;

class NiftiIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("up-nifti-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static Volume Ramp(int64_t nx, int64_t ny, int64_t nz) {
    Volume v;
    v.dims = {nx, ny, nz};
    v.spacing = {1.0, 1.5, 2.0};
    for (int64_t i = 0; i < nx * ny * nz; ++i) v.voxels.push_back(static_cast<float>(i % 200));
    return v;
  }

  fs::path dir_;
};

TEST_F(NiftiIo, RoundTripKeepsShapeSpacingAndOrder) {
  const Volume v = Ramp(5, 4, 3);
  for (const char* name : {"a.nii.gz", "b.nii"}) {
    for (NiftiStorage storage :
         {NiftiStorage::kUInt8, NiftiStorage::kInt16, NiftiStorage::kFloat32}) {
      WriteNifti(Path(name), v, storage);
      const Volume r = ReadNifti(Path(name));
      EXPECT_EQ(r.dims, v.dims) << name;
      EXPECT_DOUBLE_EQ(r.spacing[1], 1.5);
      EXPECT_DOUBLE_EQ(r.spacing[2], 2.0);
      ASSERT_EQ(r.voxels.size(), v.voxels.size());
      EXPECT_EQ(r.voxels, v.voxels) << name;
      // Voxel (x=2, y=1, z=1) sits at x + nx*(y + ny*z).
      EXPECT_FLOAT_EQ(r.voxels[2 + 5 * (1 + 4 * 1)],
                      static_cast<float>((2 + 5 * (1 + 4 * 1)) % 200));
    }
  }
  EXPECT_FALSE(fs::exists(Path("a.nii.gz.tmp.nii.gz")));
}

TEST_F(NiftiIo, RoundTripKeepsTheSpatialHeader) {
  Volume v = Ramp(4, 3, 2);
  // BraTS' orientation: 180 degrees about z (qform), the same as an affine
  // (sform), with an origin and a left-handed qfac.
  v.space.qform_code = 1;
  v.space.sform_code = 2;
  v.space.quatern = {0, 0, 1};
  v.space.qoffset = {-0.5, 239, 12.25};
  v.space.qfac = -1;
  v.space.srow = {{{-1, 0, 0, -0.5}, {0, -1.5, 0, 239}, {0, 0, 2, 12.25}}};
  WriteNifti(Path("space.nii.gz"), v, NiftiStorage::kUInt8);
  const Volume r = ReadNifti(Path("space.nii.gz"));
  EXPECT_TRUE(r.space == v.space) << "qform " << r.space.qform_code << " sform "
                                  << r.space.sform_code << " qfac " << r.space.qfac
                                  << " srow[1][3] " << r.space.srow[1][3];
  // A volume made with this header's space, written and read, keeps it.
  Volume copy = Ramp(4, 3, 2);
  copy.space = r.space;
  WriteNifti(Path("copy.nii"), copy, NiftiStorage::kFloat32);
  EXPECT_TRUE(ReadNifti(Path("copy.nii")).space == v.space);
}

TEST_F(NiftiIo, StorageRoundsAndClamps) {
  Volume v;
  v.dims = {3, 1, 1};
  v.voxels = {-5.f, 2.6f, 300.f};
  WriteNifti(Path("c.nii.gz"), v, NiftiStorage::kUInt8);
  EXPECT_EQ(ReadNifti(Path("c.nii.gz")).voxels, (std::vector<float>{0.f, 3.f, 255.f}));
}

TEST_F(NiftiIo, MissingFileNamesIt) {
  try {
    ReadNifti(Path("none.nii.gz"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("none.nii.gz"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST_F(NiftiIo, GarbageFileIsAClearError) {
  std::ofstream(Path("bad.nii")) << std::string(400, 'x');
  try {
    ReadNifti(Path("bad.nii"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.nii"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NIfTI"), std::string::npos) << e.what();
  }
}

TEST_F(NiftiIo, TruncatedFileIsAClearError) {
  WriteNifti(Path("t.nii"), Ramp(4, 4, 4), NiftiStorage::kFloat32);
  fs::resize_file(Path("t.nii"), fs::file_size(Path("t.nii")) - 100);
  EXPECT_THROW(ReadNifti(Path("t.nii")), UsageError);
}

TEST_F(NiftiIo, WriteIntoMissingFolderIsARuntimeError) {
  EXPECT_THROW(WriteNifti(Path("no/such/dir/x.nii.gz"), Ramp(2, 2, 2), NiftiStorage::kUInt8),
               RuntimeError);
}

}  // namespace
}  // namespace up
