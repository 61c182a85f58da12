// libpng wrapper; see png_io.h. libpng reports errors through longjmp, so the
// setjmp frames below are kept free of C++ objects with destructors.
#include "common/formats/png_io.h"

#include <png.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/base/errors.h"

namespace up {
namespace {

constexpr png_uint_32 kMaxPngSide = 16384;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

PngImage ReadPngImpl(const std::string& path, PngPalette palette, bool pixels) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) throw UsageError("cannot open image '" + path + "': " + std::strerror(errno));
  unsigned char sig[8];
  if (std::fread(sig, 1, 8, file.get()) != 8 || png_sig_cmp(sig, 0, 8) != 0) {
    throw UsageError("'" + path +
                     "' is not a PNG file (bad signature); images and masks must be PNG");
  }
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw RuntimeError("libpng could not allocate a reader for '" + path + "'");
  }
  PngImage img;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw UsageError("'" + path + "' is a corrupt or truncated PNG file");
  }
  png_init_io(png, file.get());
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  // The header's size comes from the file: checked before anything is allocated.
  if (png_get_image_width(png, info) > kMaxPngSide ||
      png_get_image_height(png, info) > kMaxPngSide) {
    const std::string size = std::to_string(png_get_image_width(png, info)) + "x" +
                             std::to_string(png_get_image_height(png, info));
    png_destroy_read_struct(&png, &info, nullptr);
    throw UsageError("'" + path + "' claims " + size + " pixels; images larger than " +
                     std::to_string(kMaxPngSide) + "x" + std::to_string(kMaxPngSide) +
                     " are refused (is the file corrupt?)");
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE && palette == PngPalette::kExpand)
    png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_PALETTE && depth < 8) png_set_packing(png);  // one index per byte
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  png_read_update_info(png, info);
  img.width = static_cast<int>(png_get_image_width(png, info));
  img.height = static_cast<int>(png_get_image_height(png, info));
  img.channels = png_get_channels(png, info);
  if (!pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return img;
  }
  const size_t stride = png_get_rowbytes(png, info);
  img.pixels.resize(stride * img.height);
  rows.resize(img.height);
  for (int y = 0; y < img.height; ++y) rows[y] = img.pixels.data() + y * stride;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return img;
}

}  // namespace

PngImage ReadPng(const std::string& path, PngPalette palette) {
  return ReadPngImpl(path, palette, /*pixels=*/true);
}

PngImage ReadPngHeader(const std::string& path, PngPalette palette) {
  return ReadPngImpl(path, palette, /*pixels=*/false);
}

void WritePng(const std::string& path, const PngImage& img) {
  static const int kTypes[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                               PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA};
  if (img.channels < 1 || img.channels > 4 ||
      img.pixels.size() != static_cast<size_t>(img.width) * img.height * img.channels) {
    throw RuntimeError("WritePng('" + path + "'): inconsistent image buffer");
  }
  const std::string tmp = path + ".tmp";
  FilePtr file(std::fopen(tmp.c_str(), "wb"));
  if (!file) throw RuntimeError("cannot write '" + tmp + "': " + std::strerror(errno));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw RuntimeError("libpng could not allocate a writer for '" + path + "'");
  }
  std::vector<png_bytep> rows(img.height);
  for (int y = 0; y < img.height; ++y) {
    rows[y] = const_cast<png_bytep>(img.pixels.data() +
                                    static_cast<size_t>(y) * img.width * img.channels);
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw RuntimeError("libpng failed while writing '" + path + "'");
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, img.width, img.height, 8, kTypes[img.channels], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fflush(file.get()) != 0)
    throw RuntimeError("cannot write '" + tmp + "': " + std::strerror(errno));
  file.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw RuntimeError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace up
