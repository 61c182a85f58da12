// 8-bit PNG files in and out, through Debian's libpng.
//
// Torch-free: images are plain interleaved byte buffers. Errors are
// up::UsageError naming the file (a bad input file is something the user fixes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace up {

struct PngImage {
  int width = 0;
  int height = 0;
  int channels = 0;             // 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;  // (height, width, channels), row-major
};

// What a palette PNG gives: RGB(A) colours, or its indices as one 8-bit
// channel (masks saved with a palette hold class indices).
enum class PngPalette { kExpand, kIndices };

// Reads any PNG, converting sub-byte greys to 8 bits and 16-bit samples down
// to 8; keeps the file's channel count (palette: see PngPalette).
// UsageError for a missing, corrupt or truncated file, and for one whose
// header claims more than 16384 pixels a side (checked before allocating).
PngImage ReadPng(const std::string& path, PngPalette palette = PngPalette::kExpand);

// Only the header: width, height and channels as ReadPng would give them,
// `pixels` empty. Cheap enough to check a whole dataset up front.
PngImage ReadPngHeader(const std::string& path, PngPalette palette = PngPalette::kExpand);

// Writes 8-bit grey/GA/RGB/RGBA atomically enough for outputs (temp + rename).
void WritePng(const std::string& path, const PngImage& image);

}  // namespace up
