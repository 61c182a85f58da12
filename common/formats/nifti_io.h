// 3-D NIfTI volumes (.nii, .nii.gz; NIfTI-1 or -2) in and out, through
// Debian's NIfTI library (libnifti2-dev).
//
// Torch-free: a volume is a plain float buffer with x varying fastest, the
// order of the file, so viewed as a (z, y, x) = (D, H, W) tensor it needs no
// copy. Reading applies the file's scaling (scl_slope, scl_inter). Errors are
// up::UsageError naming the file (a bad input file is something the user
// fixes); a failed write is an up::RuntimeError. Thread-safe as far as the
// library is (it keeps no state between calls here).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace up {

// Where the voxels lie in the world, as the file's header says: the qform
// (a rotation as a quaternion, offsets and the handedness qfac) and the
// sform (the first three rows of a voxel-to-world affine). A code of 0 means
// the header does not set that transform. Copied from an input to a
// prediction, so the prediction overlays the input in any viewer.
struct NiftiSpace {
  int qform_code = 0;
  int sform_code = 0;
  std::array<double, 3> quatern{0, 0, 0};  // b, c, d
  std::array<double, 3> qoffset{0, 0, 0};  // x, y, z (mm)
  double qfac = 1;                         // -1 or 1
  std::array<std::array<double, 4>, 3> srow{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}};

  bool operator==(const NiftiSpace& o) const {
    return qform_code == o.qform_code && sform_code == o.sform_code && quatern == o.quatern &&
           qoffset == o.qoffset && qfac == o.qfac && srow == o.srow;
  }
};

struct Volume {
  std::array<int64_t, 3> dims{0, 0, 0};    // nx, ny, nz (voxels)
  std::array<double, 3> spacing{1, 1, 1};  // dx, dy, dz (mm)
  NiftiSpace space;                        // the header's qform and sform
  std::vector<float> voxels;               // (nz, ny, nx) row-major: x fastest
};

// Reads a 3-D scalar volume (a 4-D file is accepted when its 4th axis is 1).
Volume ReadNifti(const std::string& path);

// The volume's size (nx, ny, nz) from its header alone; UsageError as ReadNifti.
std::array<int64_t, 3> ReadNiftiDims(const std::string& path);

// How voxels are stored when writing.
enum class NiftiStorage { kUInt8, kInt16, kFloat32 };

// Writes a NIfTI-1 file (gzip-compressed when `path` ends in .gz), converting
// voxels to `storage` with rounding; written under a temporary name and
// renamed, so a reader never sees half a file.
void WriteNifti(const std::string& path, const Volume& volume, NiftiStorage storage);

}  // namespace up
