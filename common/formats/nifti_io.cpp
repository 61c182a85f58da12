// See nifti_io.h.
#include "common/formats/nifti_io.h"

#include <nifti2_io.h>
#include <znzlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "common/base/errors.h"

namespace up {
namespace {

namespace fs = std::filesystem;

struct ImageFree {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};
using ImagePtr = std::unique_ptr<nifti_image, ImageFree>;

template <typename T>
void Convert(const void* data, int64_t count, double slope, double inter, float* out) {
  const T* in = static_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i] * slope + inter);
}

template <typename T>
void Store(const std::vector<float>& in, void* data) {
  T* out = static_cast<T*>(data);
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = static_cast<T>(std::clamp(std::nearbyint(static_cast<double>(in[i])), lo, hi));
  }
}

// Reads the voxels of `image` (a header read without data) into
// image->data, in this machine's byte order; false when the file is short.
bool ReadVoxels(nifti_image* image) {
  const int64_t bytes = image->nvox * image->nbyper;
  if (image->iname == nullptr || bytes <= 0) return false;
  znzFile f = znzopen(image->iname, "rb", nifti_is_gzfile(image->iname));
  if (znz_isnull(f)) return false;
  bool ok = znzseek(f, static_cast<znz_off_t>(image->iname_offset), SEEK_SET) >= 0;
  image->data = std::calloc(static_cast<size_t>(bytes), 1);
  ok = ok && image->data != nullptr &&
       static_cast<int64_t>(znzread(image->data, 1, static_cast<size_t>(bytes), f)) == bytes;
  znzclose(f);
  if (ok && image->byteorder != nifti_short_order() && image->swapsize > 1)
    nifti_swap_Nbytes(bytes / image->swapsize, image->swapsize, image->data);
  return ok;
}

// The index of the first NaN or infinite voxel, or -1.
template <typename T>
int64_t FirstNonFinite(const void* data, int64_t count) {
  const T* in = static_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(in[i])) return i;
  return -1;
}

}  // namespace

std::array<int64_t, 3> ReadNiftiDims(const std::string& path) {
  nifti_set_debug_level(0);
  ImagePtr image(nifti_image_read(path.c_str(), /*read_data=*/0));
  if (!image) {
    throw UsageError("cannot read '" + path +
                     "' as a NIfTI volume (not a NIfTI-1/2 file, or missing); replace the file");
  }
  return {image->nx, image->ny, image->nz};
}

Volume ReadNifti(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError("NIfTI file '" + path + "' does not exist; check data.path and the file name");
  }
  nifti_set_debug_level(0);  // the library would print its own messages
  // The header through the library; the voxels read here, because the
  // library's own reader silently turns NaN and infinite floats into 0.
  ImagePtr image(nifti_image_read(path.c_str(), /*read_data=*/0));
  if (!image || !ReadVoxels(image.get())) {
    throw UsageError("cannot read '" + path +
                     "' as a NIfTI volume (not a NIfTI-1/2 file, or truncated); replace the file");
  }
  int64_t extra = 1;  // voxels per spatial position along axes 4..ndim
  for (int64_t axis = 4; axis <= image->ndim && axis < 8; ++axis)
    extra *= std::max<int64_t>(1, image->dim[axis]);
  if (image->ndim < 3 || image->nz < 1 || extra != 1) {
    throw UsageError("NIfTI file '" + path + "' has " + std::to_string(image->ndim) +
                     " dimensions (" + std::to_string(image->nx) + "x" + std::to_string(image->ny) +
                     "x" + std::to_string(image->nz) + "x" + std::to_string(extra) +
                     "); expected one 3-D volume per file");
  }
  Volume v;
  v.dims = {image->nx, image->ny, image->nz};
  v.spacing = {image->dx, image->dy, image->dz};
  NiftiSpace& s = v.space;
  s.qform_code = image->qform_code;
  s.sform_code = image->sform_code;
  s.quatern = {image->quatern_b, image->quatern_c, image->quatern_d};
  s.qoffset = {image->qoffset_x, image->qoffset_y, image->qoffset_z};
  s.qfac = image->qfac < 0 ? -1 : 1;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) s.srow[r][c] = image->sto_xyz.m[r][c];
  v.voxels.resize(static_cast<size_t>(image->nvox));
  double slope = image->scl_slope, inter = image->scl_inter;
  if (slope == 0 || !std::isfinite(slope)) {  // 0 means "no scaling"
    slope = 1;
    inter = 0;
  }
  float* out = v.voxels.data();
  const int64_t n = image->nvox;
  const int64_t bad = image->datatype == DT_FLOAT32   ? FirstNonFinite<float>(image->data, n)
                      : image->datatype == DT_FLOAT64 ? FirstNonFinite<double>(image->data, n)
                                                      : -1;
  if (bad >= 0) {
    throw UsageError("NIfTI file '" + path +
                     "' holds a NaN or infinite voxel (at x=" + std::to_string(bad % image->nx) +
                     ", y=" + std::to_string(bad / image->nx % image->ny) +
                     ", z=" + std::to_string(bad / (image->nx * image->ny)) +
                     "); fix the volume or leave the case out");
  }
  switch (image->datatype) {
    case DT_UINT8:
      Convert<uint8_t>(image->data, n, slope, inter, out);
      break;
    case DT_INT8:
      Convert<int8_t>(image->data, n, slope, inter, out);
      break;
    case DT_INT16:
      Convert<int16_t>(image->data, n, slope, inter, out);
      break;
    case DT_UINT16:
      Convert<uint16_t>(image->data, n, slope, inter, out);
      break;
    case DT_INT32:
      Convert<int32_t>(image->data, n, slope, inter, out);
      break;
    case DT_UINT32:
      Convert<uint32_t>(image->data, n, slope, inter, out);
      break;
    case DT_INT64:
      Convert<int64_t>(image->data, n, slope, inter, out);
      break;
    case DT_FLOAT32:
      Convert<float>(image->data, n, slope, inter, out);
      break;
    case DT_FLOAT64:
      Convert<double>(image->data, n, slope, inter, out);
      break;
    default:
      throw UsageError("NIfTI file '" + path + "' stores voxels as " +
                       nifti_datatype_string(image->datatype) +
                       "; expected a scalar type (uint8, int16, int32, float32, ...)");
  }
  return v;
}

void WriteNifti(const std::string& path, const Volume& volume, NiftiStorage storage) {
  const int64_t count = volume.dims[0] * volume.dims[1] * volume.dims[2];
  if (count <= 0 || static_cast<size_t>(count) != volume.voxels.size()) {
    throw RuntimeError("WriteNifti('" + path + "'): dims give " + std::to_string(count) +
                       " voxels but the volume holds " + std::to_string(volume.voxels.size()));
  }
  const int datatype = storage == NiftiStorage::kUInt8   ? DT_UINT8
                       : storage == NiftiStorage::kInt16 ? DT_INT16
                                                         : DT_FLOAT32;
  const int64_t dims[8] = {3, volume.dims[0], volume.dims[1], volume.dims[2], 1, 1, 1, 1};
  nifti_set_debug_level(0);
  ImagePtr image(nifti_make_new_nim(dims, datatype, /*data_fill=*/1));
  if (!image) throw RuntimeError("WriteNifti('" + path + "'): the NIfTI library is out of memory");
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  image->dx = image->pixdim[1] = volume.spacing[0];
  image->dy = image->pixdim[2] = volume.spacing[1];
  image->dz = image->pixdim[3] = volume.spacing[2];
  image->xyz_units = NIFTI_UNITS_MM;
  const NiftiSpace& s = volume.space;
  image->qform_code = s.qform_code;
  image->sform_code = s.sform_code;
  image->quatern_b = s.quatern[0];
  image->quatern_c = s.quatern[1];
  image->quatern_d = s.quatern[2];
  image->qoffset_x = s.qoffset[0];
  image->qoffset_y = s.qoffset[1];
  image->qoffset_z = s.qoffset[2];
  image->qfac = s.qfac;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) image->sto_xyz.m[r][c] = s.srow[r][c];
  if (storage == NiftiStorage::kUInt8) Store<uint8_t>(volume.voxels, image->data);
  if (storage == NiftiStorage::kInt16) Store<int16_t>(volume.voxels, image->data);
  if (storage == NiftiStorage::kFloat32) {
    std::memcpy(image->data, volume.voxels.data(), volume.voxels.size() * sizeof(float));
  }

  // The library derives the format from the name: keep ".nii[.gz]" last.
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  const std::string tmp = path + ".tmp" + (gz ? ".nii.gz" : ".nii");
  if (nifti_set_filenames(image.get(), tmp.c_str(), /*check=*/0, /*set_byte_order=*/1) != 0) {
    throw RuntimeError("WriteNifti('" + path + "'): the NIfTI library refused the file name");
  }
  std::error_code ec;
  fs::remove(tmp, ec);
  nifti_image_write(image.get());
  if (!fs::is_regular_file(tmp, ec) || fs::file_size(tmp, ec) == 0) {
    throw RuntimeError("cannot write NIfTI file '" + path +
                       "': check that the folder exists and is writable");
  }
  fs::rename(tmp, path, ec);
  if (ec) throw RuntimeError("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
}

}  // namespace up
